/**
 * The model's own `rewind` tool (docs/pi.md#the-agents-rewind-tool): checkpoint, list, diff and
 * restore, for the agent to take back its own failed attempts instead of reaching for
 * `git checkout`, `git stash`, `git clean` or `rm`.
 *
 * Every call is one `rewind_tool` event to the bridge (ledger/bridge/tool_events.py), queued
 * behind the prompt's own events like any other. The bridge answers with the text for the model
 * and the details Pi keeps with the tool's result; for a restore, also the panel the user sees,
 * with the way back (`/rewind` → "↶ Undo the last file rewind").
 *
 * Safety lives in the bridge, not here: a restore changes only files whose current content this
 * conversation's agent wrote, leaves the user's and other sessions' work as it is and names it,
 * and writes nothing while another session's turn runs. This file only registers the tool, labels
 * a checkpoint's entry (`pi.setLabel`, which retention pins), and turns "rewind is not running"
 * into an answer the model can read.
 *
 * On by default; `"rewind": {"agentTool": false}` in the project's `.pi/settings.json` or the
 * agent dir's `settings.json` leaves it unregistered.
 */
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { StringEnum } from "@mariozechner/pi-ai";
import { Type } from "typebox";
// Types only: erased when Pi's loader transpiles this file. rewind-command.ts is loaded at the
// first `/rewind` (rewind-ledger.ts), not with every Pi start (issue 34).
import type { RewindBridge } from "./rewind-command.ts";

/** Reads one `rewind` setting (rewind-ledger.ts's `rewindSetting`). */
export type RewindSetting = (cwd: string, name: string) => unknown;

type Json = Record<string, unknown>;

/** What the model reads about the tool (at most 120 words; tests/unit/test_agent_tool_words.py). */
export const DESCRIPTION =
	"Your own checkpoints of the work tree, to take back your own failed attempts safely. " +
	"checkpoint (optional label): save the files as they are now, before a risky change. " +
	"list: this conversation's points, newest first. " +
	"diff (point): what restoring a point would change, per file, and whose work each file is. " +
	"restore (point): put back the files you changed since that point; files the user or another " +
	"session changed are left alone and named, and the conversation does not move. " +
	"Use restore instead of git checkout, git stash, git clean or rm to abandon your own changes, " +
	"for instance after failing checks: diff first, then restore. The user can undo a restore.";

export const GUIDELINE =
	"Before a risky or wide change, call rewind with action \"checkpoint\". To abandon your own changes " +
	"(for instance after failing tests), call rewind \"diff\" and then \"restore\" instead of git checkout, " +
	"git stash, git clean or rm: it never touches the user's or other sessions' work.";

const PARAMETERS = Type.Object({
	action: StringEnum(["checkpoint", "list", "diff", "restore"] as const, {
		description: "checkpoint: save now; list: the points; diff / restore: a point's files",
	}),
	point: Type.Optional(
		Type.String({ description: "diff and restore: a point's id from list or checkpoint, or a checkpoint's label" }),
	),
	label: Type.Optional(Type.String({ description: "checkpoint: a short name to find it by" })),
});

function answer(text: string, details: Json): { content: { type: "text"; text: string }[]; details: Json } {
	return { content: [{ type: "text", text }], details };
}

/** Why the tool got no answer, in words for the model (the user sees rewind's own warning). */
function unavailable(bridge: RewindBridge): string {
	const off = bridge.unavailable;
	if (off?.kind === "aside") return "another rewind extension (pi-rewind-hook) records this session, so this tool is off.";
	return `rewind is not running in this session (${off?.why ?? "its bridge is unavailable"}).`;
}

/** Whether the tool is on: `rewind.agentTool` is not `false` (docs/pi.md#the-agents-rewind-tool). */
export function agentToolOn(cwd: string, rewindSetting: RewindSetting): boolean {
	return rewindSetting(cwd, "agentTool") !== false;
}

/** Register the `rewind` tool (unless `rewind.agentTool` is `false`); `setting` reads the
 * `rewind` settings. */
export function registerRewindTool(pi: ExtensionAPI, bridge: RewindBridge, setting: RewindSetting): void {
	if (!agentToolOn(process.cwd(), setting)) return;
	pi.registerTool({
		name: "rewind",
		label: "Rewind",
		description: DESCRIPTION,
		promptSnippet: "rewind: checkpoint the files, and take back your own failed changes (never the user's)",
		promptGuidelines: [GUIDELINE],
		parameters: PARAMETERS,
		// Never beside another tool of the same message: a restore must not race an edit.
		executionMode: "sequential",
		async execute(_toolCallId, params, _signal, _onUpdate, ctx: ExtensionContext) {
			const payload: Json = { action: params.action };
			if (params.point !== undefined) payload.point = params.point;
			if (params.label !== undefined) payload.label = params.label;
			const reply = await bridge.send("rewind_tool", payload, ctx);
			if (!reply || typeof reply.text !== "string") {
				if (bridge.unavailable) {
					return answer(`Nothing was changed: ${unavailable(bridge)}`, { action: params.action, refused: true });
				}
				// The bridge failed, died or timed out during the call: a restore may have begun.
				return answer(
					"Rewind gave no answer (it may be restarting). If this was a restore, do not retry blindly: " +
						"call rewind with action \"list\" first; the user's /rewind shows an interrupted restore and can undo it.",
					{ action: params.action, refused: true, unknown: true },
				);
			}
			const label = reply.label as { entryId?: unknown; label?: unknown } | undefined;
			if (label && typeof label.entryId === "string" && typeof label.label === "string") {
				// The checkpoint's entry gets a Pi label: shown in /tree, and pinned by retention.
				pi.setLabel(label.entryId, label.label);
			}
			return answer(reply.text, (reply.details as Json | undefined) ?? { action: params.action });
		},
	});
}
