/**
 * A stand-in for pi-rewind-hook 1.8.2 (not published on npm) for the "both extensions loaded"
 * test: like the reference it keeps its collector in memory and writes one `rewind-turn` record
 * per prompt with pi.appendEntry at agent_end, shows a "Restore Options" menu in /tree and sets
 * the footer under the same key ("rewind"). Like the reference (index.ts of pi-rewind-hook
 * 1.8.x) it listens on the event bus for `rewind:fork-preference` and `rewind:checkpoint-entry`,
 * with the reference's guards in the reference's order (it reads `mode`, resp. `source`, first
 * and returns unless the value is on its allow-list): that is what rewind-ledger's probe at
 * session start sees. Its snapshot is the work tree's `git stash create` commit (or HEAD):
 * enough to be a valid record; this file is test scaffolding only.
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function rewindHookStandIn(pi: ExtensionAPI): void {
	let prompts = 0;
	pi.events.on("rewind:fork-preference", (data) => {
		if (!data || typeof data !== "object") return;
		if (!("mode" in data) || (data as { mode?: unknown }).mode !== "conversation-only") return;
		if (!("source" in data) || (data as { source?: unknown }).source !== "fork-from-first") return;
	});
	pi.events.on("rewind:checkpoint-entry", (data) => {
		if (!data || typeof data !== "object") return;
		if (!("source" in data) || typeof (data as { source?: unknown }).source !== "string") return;
		if ((data as { source: string }).source !== "pi-custom-compaction") return;
	});
	pi.on("agent_end", async (_e, ctx) => {
		const branch = ctx.sessionManager.getBranch();
		const lastUser = [...branch].reverse().find((e) => e.type === "message" && e.message.role === "user");
		const lastAssistant = [...branch].reverse().find((e) => e.type === "message" && e.message.role === "assistant");
		const stash = await pi.exec("git", ["stash", "create"]);
		const head = await pi.exec("git", ["rev-parse", "HEAD"]);
		const sha = stash.stdout.trim() || head.stdout.trim();
		const bindings = [lastUser, lastAssistant].filter((e) => e !== undefined).map((e) => [e.id, 0]);
		pi.appendEntry("rewind-turn", { v: 2, snapshots: [sha], current: 0, bindings });
		prompts += 1;
		if (ctx.hasUI) ctx.ui.setStatus("rewind", `◆ stand-in ${prompts}`);
	});
	pi.on("session_before_tree", async (_e, ctx) => {
		if (!ctx.hasUI) return undefined;
		const choice = await ctx.ui.select("Restore Options", ["Keep current files", "Cancel navigation"]);
		return choice === "Keep current files" ? undefined : { cancel: true };
	});
}
