/**
 * `/rewind` for Pi: one overlay to find every rewind point of the branch, see what a rewind would
 * do before choosing it, and do it (docs/pi.md#rewind of rewind-ledger).
 *
 * List (newest first): each prompt's point (the files before it ran) with its text, age, how many
 * files differ from now, and ⚠ when restoring it would overwrite work the agent did not do; at the
 * top the undo row when there is one, named by the engine for the state it leads to ("Undo the last
 * file rewind (restore the files as before rewinding to "x" at 10:42)", after an undo "Redo: back
 * to the files before "x" …", and what it also takes back of the agent's work since), then the
 * earlier file states (⟲, the files before each past file rewind; restoring one is `rewind undo
 * --to OP`, one more undoable operation). Enter opens a preview: the files
 * that would change with their line counts, the user's own work named, a scrollable diff of any
 * file (Enter on a file), and the actions: restore files only, files and conversation,
 * conversation only, fork from this prompt, cancel. A fork is offered only where Pi 0.73.1 can
 * fork, at a prompt (a user message); the bridge refuses a fork intent anywhere else before
 * `ctx.fork` runs, since Pi would refuse it only after `session_before_fork` (and interactive Pi
 * exits on that error).
 *
 * With no list to show, it says why (noListText): rewind-ledger stands aside because
 * pi-rewind-hook is active (and how to switch), or its bridge gave up.
 *
 * Every decision is the engine's (the bridge events `rewind_list`, `rewind_preview`,
 * `rewind_diff`, `rewind_apply`, `rewind_intent`; ledger/bridge/rewind_events.py), and every
 * action writes the records of the menu choice it stands for: "files" and "undo" are `/fork`'s
 * "Code only" and "Undo last file rewind"; "files and conversation", "conversation only" and
 * "fork" set a one-shot intent and then run Pi's own `/tree` (`ctx.navigateTree`) or `/fork`
 * (`ctx.fork`), whose menu the intent answers. The overlay itself changes nothing.
 *
 * Keys: `/rewind` or Alt+R (no default binding of Pi's; `rewind.key` in the settings binds
 * another, `false` none). In the list, typing filters the rows (prompt text, labels, file names),
 * Home/End/PgUp/PgDn move, and the position is shown; a row cuts its prompt text before its
 * warnings and file names (issue 35). A shortcut runs without Pi's command context, which
 * `/tree` and `/fork` need: there, those actions put `/rewind ACTION ENTRY` in the editor and
 * submit it (see `run`). `/rewind ACTION ENTRY` (files|both|conversation|fork|undo) runs
 * an action directly; `/rewind undo-to OP` restores the files as they were before operation OP.
 */

import type { ExtensionCommandContext, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { decodeKittyPrintable, matchesKey, truncateToWidth, visibleWidth } from "@mariozechner/pi-tui";

type Json = Record<string, unknown>;

/** Why rewind is off for the rest of this session: `aside` when another rewind extension
 * (pi-rewind-hook) records it and ours stands aside, `gave-up` when the bridge could not be kept
 * running (rewind-ledger.ts's `Bridge.unavailable`). */
export interface RewindOff {
	kind: "aside" | "gave-up";
	why: string;
}

/** What the command needs of the extension's bridge (rewind-ledger.ts's `Bridge`). */
export interface RewindBridge {
	send(event: string, payload: Json, ctx: ExtensionContext | undefined): Promise<Json | undefined>;
	readonly unavailable?: RewindOff | undefined;
}

/** What `/rewind` says when it has no list to show: why, and what to do (issue 32). */
export function noListText(off: RewindOff | undefined): string {
	if (off?.kind === "aside")
		return (
			"Rewind: /rewind is off in this session: pi-rewind-hook (the reference rewind extension) is active " +
			"and records every prompt, so rewind-ledger stands aside (the footer's points are pi-rewind-hook's; " +
			"its /tree and /fork menus work). To use rewind-ledger and its /rewind: remove pi-rewind-hook " +
			"(pi remove <its source>, or delete it from ~/.pi/agent/extensions/), then restart Pi or run /reload."
		);
	if (off?.kind === "gave-up")
		return (
			`Rewind: /rewind is off in this session: the bridge is unavailable (${off.why}); the warning ` +
			"\"Rewind: bridge unavailable\" says why and how to fix it; then run /reload to start rewind again."
		);
	return "Rewind: no rewind points to show: the bridge gave no list (it is restarting, or its warning says why); try /rewind again.";
}

interface Counts {
	added: number;
	modified: number;
	deleted: number;
	words: string;
	files: string;
}
interface Point {
	entryId: string;
	text: string;
	timestamp: string | null;
	snapshot?: string | null;
	pruned: boolean;
	/** No point to restore: `never` (no snapshot was taken as it ran) or `pruned` (by retention). */
	missing?: "never" | "pruned" | null;
	/** The engine's words for `missing`, for the row. */
	missingText?: string | null;
	counts: Counts;
	own: string[];
	others?: string[];
}
interface UndoItem {
	/** The engine's words for the state it leads to (undo, redo, or an interrupted restore's). */
	label: string;
	redo: boolean;
	kind?: "undo" | "redo" | "interrupted";
	counts: Counts;
	own: string[];
	others?: string[];
}
/** The files as they were before a past file operation (`rewind history`'s OP). */
interface StateItem {
	operation: string;
	kind: string;
	label: string;
	timestamp: string | null;
	counts: Counts;
	own: string[];
	others?: string[];
}
interface PointList {
	points: Point[];
	undo: UndoItem | null;
	states?: StateItem[];
	more: number;
	shadow: string | null;
}
interface PreviewFile {
	path: string;
	change: string;
	additions: number;
	deletions: number;
	binary: boolean;
	own: boolean;
	by?: string | null;
	/** The label of that session (its name or first prompt, and the id's random tail). */
	byLabel?: string | null;
	/** A binary file's size in bytes now and after the restore (0: absent on that side). */
	sizes?: [number, number] | null;
}
interface Action {
	id: string;
	label: string;
	available: boolean;
	why: string | null;
}
interface Preview {
	entryId: string;
	text: string;
	/** The heading (`Rewind to before "x"`, `Restore the files before rewinding to "x" (10:42)`). */
	title?: string;
	/** Set for a state before a past operation: its id. */
	operation?: string | null;
	/** What else the restore takes back (the agent's work since the last file rewind). */
	note?: string | null;
	snapshot: string | null;
	counts: Counts;
	files: PreviewFile[];
	more: number;
	ownLine: string | null;
	otherLines?: string[];
	warnings: string[];
	actions: Action[];
	refused: string | null;
	/** Why this entry has no point to restore, and what to do instead. */
	missing?: string | null;
}
type Decision = { action: string; entryId?: string } | undefined;
type Style = (color: string, text: string) => string;

const ACTIONS = new Set(["files", "both", "conversation", "fork", "undo", "undo-to"]);

function age(timestamp: string | null): string {
	if (!timestamp) return "";
	const ms = Date.now() - Date.parse(timestamp);
	if (!Number.isFinite(ms) || ms < 0) return "";
	const s = Math.round(ms / 1000);
	if (s < 60) return `${s}s ago`;
	if (s < 3600) return `${Math.round(s / 60)}m ago`;
	if (s < 86400) return `${Math.round(s / 3600)}h ago`;
	return `${Math.round(s / 86400)}d ago`;
}

/** `1.2 KB` (bytes below 1 KB, one decimal above). */
function bytes(n: number): string {
	if (n < 1024) return `${n} B`;
	const units = ["KB", "MB", "GB", "TB"];
	let value = n / 1024;
	let unit = 0;
	while (value >= 1024 && unit < units.length - 1) {
		value /= 1024;
		unit += 1;
	}
	return `${value.toFixed(1)} ${units[unit]}`;
}

/** A binary file's row instead of line counts: `binary 1.2 KB → 3.4 KB` (now → after). */
function binarySizes(f: PreviewFile): string {
	if (!f.sizes) return "binary";
	const [now, after] = f.sizes;
	if (f.change === "A") return `binary, ${bytes(after)}`;
	if (f.change === "D") return `binary, ${bytes(now)}`;
	return `binary ${bytes(now)} → ${bytes(after)}`;
}

/** `a.txt, b.txt (+3 more)`. */
function names(paths: string[], shown = 2): string {
	const more = paths.length - shown;
	return paths.slice(0, shown).join(", ") + (more > 0 ? ` (+${more} more)` : "");
}

/** `text` in lines of at most `width` columns, broken between words. */
function wrap(text: string, width: number): string[] {
	const lines: string[] = [];
	let line = "";
	for (const word of text.split(/\s+/).filter(Boolean)) {
		const next = line ? `${line} ${word}` : word;
		if (line && visibleWidth(next) > width) {
			lines.push(line);
			line = word;
		} else line = next;
	}
	if (line) lines.push(line);
	return lines;
}

function fit(text: string, width: number): string {
	const cut = truncateToWidth(text, Math.max(1, width));
	return cut + " ".repeat(Math.max(0, width - visibleWidth(cut)));
}

/** The text a key typed, when it is text (a character, or a paste of several): what the list's
 * filter takes. Keys with a meaning (arrows, Enter, Esc, Backspace) are never text. */
function typedText(data: string): string | undefined {
	const kitty = decodeKittyPrintable(data);
	if (kitty !== undefined) return kitty;
	return data.length > 0 && !/[\x00-\x1f\x7f]/.test(data) ? data : undefined;
}

type Item = { kind: "undo" } | { kind: "state"; state: StateItem } | { kind: "point"; point: Point };

/** What the filter matches a row against: its prompt text or label, and the file names it shows. */
function haystack(item: Item, list: PointList): string {
	const parts: string[] = [];
	if (item.kind === "undo" && list.undo) parts.push(list.undo.label, list.undo.counts.files, ...list.undo.own, ...(list.undo.others ?? []));
	else if (item.kind === "state") parts.push(item.state.label, item.state.counts.files, ...item.state.own, ...(item.state.others ?? []));
	else if (item.kind === "point") parts.push(item.point.text, item.point.counts.files, ...item.point.own, ...(item.point.others ?? []));
	return parts.join("\n").toLowerCase();
}

/** A point's row: the age, what a restore would change and the warnings first, then the file
 * names, then the prompt text, which is what gets cut when the row is too wide (issue 35). */
function pointRow(head: string, files: string, prompt: string, width: number): string {
	const whole = files ? `${head} · ${files} · ${prompt}` : `${head} · ${prompt}`;
	if (visibleWidth(whole) <= width) return whole;
	const avail = width - visibleWidth(head) - 3; // after "head · "
	const filesRoom = avail - 3 - 10; // and " · " plus at least 10 columns of the prompt
	if (files && filesRoom >= 8) {
		const shownFiles = visibleWidth(files) <= filesRoom ? files : truncateToWidth(files, filesRoom, "…");
		return `${head} · ${shownFiles} · ${truncateToWidth(prompt, avail - 3 - visibleWidth(shownFiles), "…")}`;
	}
	if (avail >= 8) return `${head} · ${truncateToWidth(prompt, avail, "…")}`;
	return truncateToWidth(whole, width, "…");
}

/** The overlay: list → preview → diff, one screen at a time; `done` ends it with a decision. */
class RewindOverlay {
	private view: "list" | "preview" | "diff" = "list";
	private cursor = 0;
	private preview: Preview | undefined;
	private previewCursor = 0;
	private diff: string[] = [];
	private diffTop = 0;
	private diffTitle = "";
	private message = "";
	private busy = false;
	/** What the user typed in the list: rows whose prompt text, label or file names hold it. */
	private query = "";
	/** The next refresh of an open preview that names another session's running turn. */
	private follow: ReturnType<typeof setTimeout> | undefined;
	private closed = false;

	constructor(
		private readonly list: PointList,
		private readonly fetch: (event: string, payload: Json) => Promise<Json | undefined>,
		private readonly style: Style,
		private readonly rows: () => number,
		private readonly redraw: () => void,
		private readonly done: (decision: Decision) => void,
	) {}

	/** Rows of the list: the undo item first, then the earlier file states, then the points. */
	private get allItems(): Item[] {
		return [
			...(this.list.undo ? [{ kind: "undo" as const }] : []),
			...(this.list.states ?? []).map((state) => ({ kind: "state" as const, state })),
			...this.list.points.map((point) => ({ kind: "point" as const, point })),
		];
	}

	/** The rows shown: all of them, or those the typed filter matches (case-insensitive). */
	private get items(): Item[] {
		const all = this.allItems;
		const query = this.query.trim().toLowerCase();
		return query ? all.filter((item) => haystack(item, this.list).includes(query)) : all;
	}

	/** How many rows a page of the list holds (PgUp/PgDn move by it). */
	private get listHeight(): number {
		return Math.max(3, this.rows() - 9);
	}

	handleInput(data: string): void {
		if (this.busy) return;
		if (this.view === "diff") return this.onDiffKey(data);
		if (this.view === "preview") return this.onPreviewKey(data);
		if (matchesKey(data, "ctrl+c")) return this.finish(undefined);
		if (matchesKey(data, "escape")) {
			if (!this.query) return this.finish(undefined);
			this.query = ""; // Esc clears the filter first, then closes
			this.cursor = 0;
			return this.redraw();
		}
		const items = this.items;
		const last = Math.max(0, items.length - 1);
		if (matchesKey(data, "up")) this.cursor = Math.max(0, this.cursor - 1);
		else if (matchesKey(data, "down")) this.cursor = Math.min(last, this.cursor + 1);
		else if (matchesKey(data, "home")) this.cursor = 0;
		else if (matchesKey(data, "end")) this.cursor = last;
		else if (matchesKey(data, "pageUp")) this.cursor = Math.max(0, this.cursor - this.listHeight);
		else if (matchesKey(data, "pageDown")) this.cursor = Math.min(last, this.cursor + this.listHeight);
		else if (matchesKey(data, "backspace")) {
			this.query = this.query.slice(0, -1);
			this.cursor = 0;
		} else if (matchesKey(data, "return") || matchesKey(data, "enter")) {
			const item = items[this.cursor];
			if (!item) return;
			if (item.kind === "undo") return this.finish({ action: "undo" });
			if (item.kind === "state") void this.openPreview(item.state.label, { operation: item.state.operation });
			else void this.openPreview(item.point.text, { entryId: item.point.entryId });
			return;
		} else {
			const text = typedText(data);
			if (text === undefined) return;
			this.query += text;
			this.cursor = 0;
		}
		this.redraw();
	}

	private async openPreview(text: string, payload: Json): Promise<void> {
		this.busy = true;
		this.message = `Loading the preview of "${text}"…`;
		this.redraw();
		try {
			const result = await this.fetch("rewind_preview", payload);
			const preview = result?.preview as Preview | undefined;
			if (!preview) throw new Error("no preview (see the notice)");
			this.preview = preview;
			this.previewCursor = preview.files.length; // the first action
			this.view = "preview";
			this.message = "";
			this.followTurn();
		} catch (err) {
			this.message = `Rewind: ${err instanceof Error ? err.message : String(err)}`;
		} finally {
			this.busy = false;
			this.redraw();
		}
	}

	/** End the overlay with `decision` (no refresh runs after it). */
	private finish(decision: Decision): void {
		this.dispose();
		this.done(decision);
	}

	/** While the open preview names another session's running turn (its files "turn running",
	 * its restores not offered during "a turn of session …"), ask for it again every
	 * FOLLOW_MS, so it changes as that turn ends, as the files do (issue 35). */
	private followTurn(): void {
		clearTimeout(this.follow);
		this.follow = undefined;
		const shown = this.preview;
		if (!shown || this.closed || this.view === "list") return;
		const text = JSON.stringify(shown);
		if (!text.includes("turn running") && !text.includes("a turn of session")) return;
		const timer = setTimeout(() => void this.refreshPreview(shown), FOLLOW_MS);
		timer.unref?.(); // never keeps Pi running
		this.follow = timer;
	}

	private async refreshPreview(shown: Preview): Promise<void> {
		this.follow = undefined;
		if (this.closed || this.preview !== shown || this.view === "list") return;
		if (this.busy) return this.followTurn(); // a diff is loading: next time
		const payload: Json = shown.operation ? { operation: shown.operation } : { entryId: shown.entryId };
		try {
			const fresh = (await this.fetch("rewind_preview", payload))?.preview as Preview | undefined;
			if (fresh && !this.closed && this.preview === shown) {
				// The cursor stays on the same action (or file row) when the file list changes.
				const onAction = this.previewCursor >= shown.files.length;
				const rows = fresh.files.length + fresh.actions.length;
				this.previewCursor = onAction
					? fresh.files.length + Math.min(this.previewCursor - shown.files.length, fresh.actions.length - 1)
					: Math.min(this.previewCursor, Math.max(0, rows - 1));
				this.preview = fresh;
				this.redraw();
			}
		} catch {
			// A courtesy: the preview stays as it was; the next real action asks again.
		}
		this.followTurn();
	}

	private onPreviewKey(data: string): void {
		const preview = this.preview;
		if (!preview) return;
		const rows = preview.files.length + preview.actions.length;
		if (matchesKey(data, "escape")) {
			this.view = "list";
		} else if (matchesKey(data, "up")) {
			this.previewCursor = Math.max(0, this.previewCursor - 1);
		} else if (matchesKey(data, "down")) {
			this.previewCursor = Math.min(rows - 1, this.previewCursor + 1);
		} else if (matchesKey(data, "return") || matchesKey(data, "enter")) {
			if (this.previewCursor < preview.files.length) {
				void this.openDiff(preview, preview.files[this.previewCursor]);
				return;
			}
			const action = preview.actions[this.previewCursor - preview.files.length];
			if (!action) return;
			if (action.id === "cancel") return this.finish(undefined);
			if (!action.available) {
				this.message = `Not offered: ${action.why ?? "no rewind point"}`;
			} else {
				return this.finish({ action: action.id, entryId: preview.operation ?? preview.entryId });
			}
		}
		this.redraw();
	}

	private async openDiff(preview: Preview, file: PreviewFile): Promise<void> {
		this.busy = true;
		this.redraw();
		try {
			const where = preview.operation ? { operation: preview.operation } : {};
			const result = await this.fetch("rewind_diff", { entryId: preview.entryId, path: file.path, ...where });
			const text = typeof result?.diff === "string" ? result.diff : "";
			this.diff = (text || "(no textual difference)").replace(/\n$/, "").split("\n");
			if (file.binary) this.diff.push(`(${binarySizes(file)})`);
			if (result?.cut) this.diff.push("… (cut: the rest of this diff is longer than a preview shows)");
			this.diffTop = 0;
			this.diffTitle = `${file.change} ${file.path}: what the restore would change (↑↓ PgUp PgDn scroll, Esc back)`;
			this.view = "diff";
		} catch (err) {
			this.message = `Rewind: ${err instanceof Error ? err.message : String(err)}`;
		} finally {
			this.busy = false;
			this.redraw();
		}
	}

	private onDiffKey(data: string): void {
		const page = Math.max(1, this.rows() - 6);
		const last = Math.max(0, this.diff.length - page);
		if (matchesKey(data, "escape") || matchesKey(data, "q")) this.view = "preview";
		else if (matchesKey(data, "up")) this.diffTop = Math.max(0, this.diffTop - 1);
		else if (matchesKey(data, "down")) this.diffTop = Math.min(last, this.diffTop + 1);
		else if (matchesKey(data, "pageUp")) this.diffTop = Math.max(0, this.diffTop - page);
		else if (matchesKey(data, "pageDown") || matchesKey(data, "space")) this.diffTop = Math.min(last, this.diffTop + page);
		this.redraw();
	}

	render(width: number): string[] {
		const inner = Math.max(20, width - 4);
		const body = this.view === "diff" ? this.renderDiff(inner) : this.view === "preview" ? this.renderPreview(inner) : this.renderList(inner);
		if (this.message) body.push("", this.style("warning", this.message));
		const s = this.style;
		return [
			s("border", `╭${"─".repeat(inner + 2)}╮`),
			...body.map((line) => `${s("border", "│")} ${fit(line, inner)} ${s("border", "│")}`),
			s("border", `╰${"─".repeat(inner + 2)}╯`),
		];
	}

	private window<T>(items: T[], cursor: number, height: number): { start: number; shown: T[] } {
		const start = Math.max(0, Math.min(cursor - Math.floor(height / 2), items.length - height));
		return { start, shown: items.slice(start, start + height) };
	}

	private renderList(inner: number): string[] {
		const s = this.style;
		const lines = [s("accent", "Rewind: choose a point (↑↓ PgUp PgDn Home End move, type to filter, Enter preview, Esc close)")];
		if (this.list.shadow) lines.push(s("dim", `Not a git repository: points are kept in a shadow repository (${this.list.shadow})`));
		const all = this.allItems;
		if (all.length === 0) {
			lines.push("", "No rewind points on this branch yet: each prompt gets one before it runs.");
			return lines;
		}
		const items = this.items;
		const position = items.length ? `${Math.min(this.cursor, items.length - 1) + 1} of ${items.length}` : `0 of ${all.length}`;
		lines.push(
			s("dim", this.query ? `Filter: ${this.query}▏  ${position}${items.length < all.length ? ` (of ${all.length})` : ""}  (Backspace edits, Esc clears)` : `${position}`),
		);
		if (items.length === 0) {
			lines.push("", `No point matches "${this.query}": its prompt text and file names are searched.`);
			return lines;
		}
		this.cursor = Math.min(this.cursor, items.length - 1);
		const height = this.listHeight;
		const { start, shown } = this.window(items, this.cursor, height);
		shown.forEach((item, i) => {
			const selected = start + i === this.cursor;
			const mark = selected ? "→ " : "  ";
			let text: string;
			if (item.kind === "undo") {
				const undo = this.list.undo as UndoItem;
				const own = undo.own.length ? `  ⚠ your own work: ${names(undo.own)}` : "";
				const others = undo.others?.length ? `  ⚠ another session's: ${names(undo.others)}` : "";
				text = `↶ ${undo.label} · ${undo.counts.words}${others}${own}`;
			} else if (item.kind === "state") {
				const st = item.state;
				const own = st.own.length ? `  ⚠ your own work: ${names(st.own)}` : "";
				const others = st.others?.length ? `  ⚠ another session's: ${names(st.others)}` : "";
				text = `⟲ ${st.label} · ${st.counts.words}${others}${own}`;
			} else {
				const p = item.point;
				const what = p.missingText ?? (p.pruned ? "snapshot pruned by retention: files cannot be restored" : p.counts.words);
				const own = p.own.length ? `  ⚠ your own work: ${names(p.own)}` : "";
				const others = p.others?.length ? `  ⚠ another session's: ${names(p.others)}` : "";
				const files = p.missingText || p.pruned ? "" : p.counts.files;
				text = pointRow(`${age(p.timestamp).padEnd(8)} ${what}${others}${own}`, files, `"${p.text}"`, inner - 2);
			}
			// The undo and state rows name the state they lead to and what they also take back:
			// whole, on as many lines as it takes (a prompt row cuts its prompt text to fit).
			const parts = item.kind === "point" ? [truncateToWidth(text, inner - 2)] : wrap(text, inner - 4);
			parts.forEach((part, j) => {
				const lead = j === 0 ? mark : "    ";
				lines.push(lead + (selected ? s("accent", part) : part));
			});
		});
		if (this.list.more) lines.push(s("dim", `(${this.list.more} older points not listed)`));
		return lines;
	}

	private renderPreview(inner: number): string[] {
		const s = this.style;
		const p = this.preview as Preview;
		const title = p.title || `Rewind to before "${p.text}"`;
		const lines = [s("accent", `${title}: ${p.snapshot === null ? "no point to restore" : p.counts.words}`)];
		if (p.refused) lines.push(s("error", `Files cannot be restored: ${p.refused}`));
		for (const line of wrap(p.note ? `⚠ ${p.note}` : "", inner)) lines.push(s("warning", line));
		// What happened and what to do: whole, on as many lines as it takes.
		for (const line of wrap(p.missing ?? "", inner)) lines.push(s("warning", line));
		for (const line of p.otherLines ?? []) lines.push(s("warning", `⚠ ${line}`));
		if (p.ownLine) lines.push(s("warning", `⚠ ${p.ownLine}`));
		for (const warning of p.warnings) lines.push(s("dim", warning));
		const rows: string[] = p.files.map((f) => {
			const counts = f.binary ? binarySizes(f) : `+${f.additions} -${f.deletions}`;
			return `${f.change} ${f.path}  ${counts}${f.by ? `  ⚠ session ${f.byLabel ?? `…${f.by.slice(-8)}`}'s agent` : ""}${f.own ? "  ⚠ your own work" : ""}`;
		});
		const actions = p.actions.map((a) => {
			if (a.available) return a.label;
			const said = p.missing && a.why && p.missing.includes(a.why); // said above, in full
			return `${a.label} (not offered: ${said ? "see above" : (a.why ?? "no rewind point")})`;
		});
		const height = Math.max(3, this.rows() - 10 - actions.length);
		const { start, shown } = this.window(rows, Math.min(this.previewCursor, rows.length - 1), height);
		if (rows.length) lines.push(s("dim", "Files (Enter: diff)"));
		shown.forEach((row, i) => {
			const selected = start + i === this.previewCursor;
			lines.push((selected ? "→ " : "  ") + (selected ? s("accent", row) : row));
		});
		if (p.more) lines.push(s("dim", `  (+${p.more} more files)`));
		lines.push(s("dim", "Actions (Enter to choose, Esc back)"));
		actions.forEach((label, i) => {
			const selected = rows.length + i === this.previewCursor;
			const available = p.actions[i]?.available;
			const text = available ? label : s("dim", label);
			lines.push((selected ? "→ " : "  ") + (selected ? s("accent", label) : text));
		});
		void inner;
		return lines;
	}

	private renderDiff(inner: number): string[] {
		const s = this.style;
		const page = Math.max(1, this.rows() - 6);
		const lines = [s("accent", this.diffTitle)];
		for (const line of this.diff.slice(this.diffTop, this.diffTop + page)) {
			const color = line.startsWith("+") ? "toolDiffAdded" : line.startsWith("-") ? "toolDiffRemoved" : "toolDiffContext";
			lines.push(s(color, truncateToWidth(line, inner)));
		}
		return lines;
	}

	invalidate(): void {}
	dispose(): void {
		this.closed = true;
		clearTimeout(this.follow);
	}
}

/** Pi's terminal UI as far as a shortcut needs it: the input entry point, to press Enter. */
type Keys = { handleInput?: (data: string) => void };

/** The editor's text before a shortcut put `/rewind ACTION ENTRY` there: given back when that
 * command ends (see `run`). */
let draft: string | undefined;

async function run(
	decision: Decision,
	bridge: RewindBridge,
	ctx: ExtensionContext,
	command: ExtensionCommandContext | undefined,
	keys?: Keys,
): Promise<void> {
	if (!decision) return;
	if (bridge.unavailable) {
		ctx.ui.notify(noListText(bridge.unavailable), "warning");
		return;
	}
	const { action, entryId } = decision;
	if (action === "undo") {
		await bridge.send("rewind_apply", { action: "undo" }, ctx);
		return;
	}
	if (!entryId) return;
	if (action === "undo-to") {
		// The state before a past operation (entryId holds its id): `rewind undo --to OP`.
		await bridge.send("rewind_apply", { action: "undo-to", operation: entryId }, ctx);
		return;
	}
	if (action === "files") {
		await bridge.send("rewind_apply", { action: "files", entryId }, ctx);
		return;
	}
	if (!command) {
		// A shortcut has no command context, which Pi's /tree and /fork need. So the action
		// goes through the editor as `/rewind ACTION ENTRY`, submitted with an Enter given to
		// Pi's terminal UI once the overlay has handed the focus back to the editor: the same
		// path as typing it, with a full command context. The user's draft comes back after.
		const text = ctx.ui.getEditorText();
		const enter = keys?.handleInput;
		if (typeof enter === "function") {
			draft = text;
			ctx.ui.setEditorText(`/rewind ${action} ${entryId}`);
			setTimeout(() => {
				try {
					enter.call(keys, "\r");
				} catch {
					draft = undefined; // no command of this Alt+R will come to give it back
					ctx.ui.setWidget(HINT_KEY, ["Rewind: press Enter to run it"]);
				}
			}, 0);
			return;
		}
		// A Pi without that entry point: the command waits in the editor for Enter, with a hint
		// that the next key takes away (Enter runs it, any other key edits or clears it).
		ctx.ui.setEditorText(`/rewind ${action} ${entryId}`);
		ctx.ui.setWidget(HINT_KEY, ["Rewind: press Enter to run it (/tree and /fork need a command: Pi runs them only from the editor)"]);
		const off = ctx.ui.onTerminalInput(() => {
			off();
			ctx.ui.setWidget(HINT_KEY, undefined);
			return undefined; // the key itself goes on to the editor
		});
		return;
	}
	const intent = await bridge.send("rewind_intent", { action, entryId }, ctx);
	if (!intent || intent.intent !== action) return; // the bridge said why
	if (action === "fork") await command.fork(entryId);
	else await command.navigateTree(entryId);
}

async function open(bridge: RewindBridge, ctx: ExtensionContext, command: ExtensionCommandContext | undefined): Promise<void> {
	if (!ctx.hasUI) return;
	if (bridge.unavailable) {
		ctx.ui.notify(noListText(bridge.unavailable), "warning");
		return;
	}
	const listed = await bridge.send("rewind_list", {}, ctx);
	const list = listed?.list as PointList | undefined;
	if (!list) {
		ctx.ui.notify(noListText(bridge.unavailable), "warning");
		return;
	}
	let keys: Keys | undefined;
	const decision = await ctx.ui.custom<Decision>(
		(tui, theme, _keybindings, done) =>
			((keys = tui as unknown as Keys), new RewindOverlay(
				list,
				(event, payload) => bridge.send(event, payload, ctx),
				(color, text) => {
					try {
						return theme.fg(color as Parameters<typeof theme.fg>[0], text);
					} catch {
						return text;
					}
				},
				() => Math.max(10, Math.floor((process.stdout.rows || 30) * 0.8)),
				() => tui.requestRender(),
				done,
			)),
		{ overlay: true, overlayOptions: { width: "90%", maxHeight: "85%", anchor: "center" } },
	);
	await run(decision, bridge, ctx, command, keys);
}

/** How often an open preview that names another session's running turn is asked for again. */
const FOLLOW_MS = 1000;
/** The widget that says how to run an action a shortcut could not (see `run`). */
const HINT_KEY = "rewind-hint";

/** `/rewind [ACTION ENTRY]`: the list, or an action run directly (rewind-ledger.ts registers
 * the command and loads this module at its first use). */
export async function rewindCommand(args: string, bridge: RewindBridge, ctx: ExtensionCommandContext): Promise<void> {
	const kept = draft;
	draft = undefined;
	try {
		await ctx.waitForIdle();
		const [action, entryId] = args.trim().split(/\s+/);
		if (action && ACTIONS.has(action)) {
			await run({ action, entryId }, bridge, ctx, ctx);
			return;
		}
		await open(bridge, ctx, ctx);
	} finally {
		// What the user was writing before Alt+R's action took the editor. After a fork
		// this ctx is stale (Pi throws on its use): the draft stays with the old session.
		if (kept) {
			try {
				if (!ctx.ui.getEditorText()) ctx.ui.setEditorText(kept);
			} catch {
				// the session was replaced
			}
		}
	}
}

/** The key's action: open the list. */
export async function rewindKeyPressed(bridge: RewindBridge, ctx: ExtensionContext): Promise<void> {
	await open(bridge, ctx, undefined);
}
