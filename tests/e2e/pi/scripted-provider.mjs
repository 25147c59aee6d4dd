// A Pi extension for the end-to-end tests (vendored and extended from
// shared/pi-fixtures/scripted-provider.mjs): the offline provider "scripted" / model "scripted-1",
// answered in-process by pi-ai's faux provider. No network, no API key.
//
// Reply policy, per LLM call, from the last user message's text:
//   * it contains `[[turns: JSON]]`, JSON = [[call, ...], [call, ...], ...], call = {"name": tool, "args": {...}}:
//     the n-th LLM call of this prompt issues turn n's tool calls (one assistant message, several
//     tool calls); when the turns are used up it answers "Done: <turns> turns", or "Done: X" when
//     the text also contains `[[done: X]]` (a unique marker for tests that read a screen).
//   * it contains "[no-tools]": "Echo: <text>".
//   * otherwise one bash call `echo <text>`, then "Done: <first output line>" (the fixture's policy).
//   * Pi's own summarization calls (compaction, /tree branch summaries; recognized by their system
//     prompt) get a short text summary.
//
// Works in print, RPC and interactive mode (interactive Pi resets pi-ai's API registry after
// loading extensions, so the faux stream is called directly).
//
// SCRIPTED_LATENCY_MS delays each answer (benchmarks); SCRIPTED_LOG names a file that gets a
// line per request with its time (tests).
//
// It also registers the command /e2e-tree <entryId> [summarize], which navigates the session tree
// with ctx.navigateTree (Pi's RPC mode has no /tree command), so tests can drive /tree.

import { appendFileSync } from "node:fs";
import { fauxAssistantMessage, fauxText, fauxToolCall, getApiProvider, registerFauxProvider } from "@mariozechner/pi-ai";

function textOf(content) {
	if (typeof content === "string") return content;
	return (content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

export default function scriptedProvider(pi) {
	const faux = registerFauxProvider({
		api: "scripted-faux",
		provider: "scripted",
		models: [{ id: "scripted-1", name: "Scripted 1", reasoning: false, contextWindow: 128000, maxTokens: 4096 }],
	});
	// Interactive Pi resets pi-ai's API registry (resetApiProviders) after extensions load, which
	// drops "scripted-faux": keep its stream function and call it directly, not through the registry.
	const fauxApi = getApiProvider("scripted-faux");
	if (!fauxApi) throw new Error("the faux provider did not register");

	const respond = (context) => {
		if (String(context.systemPrompt ?? "").startsWith("You are a context summarization assistant")) {
			return fauxAssistantMessage([fauxText("## Goal\nScripted summary.")]);
		}
		const msgs = context.messages ?? [];
		let userIndex = -1;
		for (let i = msgs.length - 1; i >= 0; i--) {
			if (msgs[i].role === "user") {
				userIndex = i;
				break;
			}
		}
		const userText = userIndex >= 0 ? textOf(msgs[userIndex].content) : "";
		const done = msgs.slice(userIndex + 1).filter((m) => m.role === "assistant").length;
		const script = userText.match(/\[\[turns: ([\s\S]*)\]\]/);
		if (script) {
			const turns = JSON.parse(script[1]);
			if (done < turns.length) {
				const calls = turns[done].map((c) => fauxToolCall(c.name, c.args));
				return fauxAssistantMessage(calls, { stopReason: "toolUse" });
			}
			const tag = userText.match(/\[\[done: ([^\]]+)\]\]/);
			return fauxAssistantMessage(tag ? `Done: ${tag[1]}` : `Done: ${turns.length} turns`);
		}
		const last = msgs[msgs.length - 1];
		if (last?.role === "toolResult") {
			return fauxAssistantMessage(`Done: ${textOf(last.content).split("\n")[0].slice(0, 60)}`);
		}
		if (userText.includes("[no-tools]") || !(context.tools?.length > 0)) {
			return fauxAssistantMessage([fauxText(`Echo: ${userText}`)]);
		}
		const safe = userText.slice(0, 40).replace(/[^A-Za-z0-9 _.,:-]/g, "");
		return fauxAssistantMessage([fauxToolCall("bash", { command: `echo '${safe}'` })], { stopReason: "toolUse" });
	};

	pi.registerProvider("scripted", {
		name: "Scripted (faux, offline)",
		baseUrl: "http://127.0.0.1:9",
		apiKey: "scripted-literal-key-not-a-secret",
		api: "scripted",
		models: [{
			id: "scripted-1", name: "Scripted 1", reasoning: false, input: ["text"],
			cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 128000, maxTokens: 4096,
		}],
		streamSimple: (_model, context, options) => {
			// SCRIPTED_LOG: when each request reached the model (ms since the epoch), for tests.
			if (process.env.SCRIPTED_LOG) appendFileSync(process.env.SCRIPTED_LOG, `request ${Date.now()}\n`);
			// SCRIPTED_LATENCY_MS: answer that much later, as a model over the network does
			// (tools/bench_first_pi.py --latency); 0 or unset: at once.
			const latency = Number(process.env.SCRIPTED_LATENCY_MS ?? 0);
			faux.setResponses([latency > 0 ? async (c) => (await new Promise((r) => setTimeout(r, latency)), respond(c)) : respond]);
			return fauxApi.streamSimple(faux.getModel("scripted-1"), context, options);
		},
	});

	pi.registerCommand("e2e-tree", {
		description: "navigate the session tree (tests)",
		handler: async (args, ctx) => {
			const [target, summarize] = String(args ?? "").trim().split(/\s+/);
			const result = await ctx.navigateTree(target, { summarize: summarize === "summarize" });
			ctx.ui.notify(`e2e-tree: ${result?.cancelled ? "cancelled" : "done"}`, "info");
		},
	});
}
