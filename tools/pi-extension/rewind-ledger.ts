/**
 * rewind-ledger for Pi: runs the rewind engine of the `ledger` Python package inside Pi.
 *
 * Load it with `pi -e /path/to/rewind-ledger.ts`, or copy it to ~/.pi/agent/extensions/.
 * It replaces pi-rewind-hook (disable that one): same records, same menus, defects fixed.
 *
 * This file is deliberately thin: it starts `rewind serve --stdio` (the bridge), forwards Pi's
 * events to it, answers the bridge's calls (session facts, pi.appendEntry, ctx.ui.select), and
 * shows what the engine returns (notices, the footer status, cancel / skipConversationRestore).
 * Every rewind decision is made by the engine. Protocol: README "The bridge protocol" and
 * schemas/bridge.schema.json of rewind-ledger.
 *
 * Safety: Pi owns the session file while it runs; every record goes through pi.appendEntry.
 * If the bridge cannot start, dies or stops answering (REWIND_BRIDGE_TIMEOUT_MS, default 120 s
 * per event), the extension warns once and Pi carries on without rewind.
 *
 * Bridge command: $REWIND_BRIDGE_CMD (a JSON array of argv) if set, else `rewind serve --stdio`
 * when `rewind` is on PATH, else `python3 -m ledger serve --stdio`.
 */

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

type Json = any;
type Ctx = any;

const TIMEOUT_MS = Number(process.env.REWIND_BRIDGE_TIMEOUT_MS ?? "120000") || 120000;

function bridgeCommand(): string[] {
	const configured = process.env.REWIND_BRIDGE_CMD;
	if (configured) {
		const argv = JSON.parse(configured);
		if (Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === "string")) return argv;
		throw new Error("REWIND_BRIDGE_CMD must be a JSON array of strings");
	}
	for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
		if (!dir) continue;
		const candidate = path.join(dir, "rewind");
		try {
			fs.accessSync(candidate, fs.constants.X_OK);
			return [candidate, "serve", "--stdio"];
		} catch {
			// not here
		}
	}
	return ["python3", "-m", "ledger", "serve", "--stdio"];
}

/** A per-event deadline that does not count the time a menu waits for the user. */
class Deadline {
	private timer: ReturnType<typeof setTimeout> | undefined;
	private left: number;
	private since = 0;

	constructor(ms: number, private readonly expire: () => void) {
		this.left = ms;
		this.resume();
	}

	pause(): void {
		if (!this.timer) return;
		clearTimeout(this.timer);
		this.timer = undefined;
		this.left -= Date.now() - this.since;
	}

	resume(): void {
		if (this.timer) return;
		this.since = Date.now();
		this.timer = setTimeout(this.expire, Math.max(0, this.left));
	}

	clear(): void {
		this.pause();
	}
}

type Waiting = { id: number; resolve: (m: Json) => void; reject: (e: Error) => void; ctx: Ctx; deadline: Deadline };

class Bridge {
	private child: ChildProcessWithoutNullStreams | undefined;
	private buffer = "";
	private nextId = 1;
	private waiting: Waiting | undefined;
	private queue: Promise<unknown> = Promise.resolve();
	/** Why the bridge is unusable (it could not start, exited, or did not answer in time). */
	dead: string | undefined;
	/** session_shutdown was forwarded and stdin closed: the bridge's exit is expected. */
	private closed = false;
	private warned = false;
	lastCtx: Ctx;

	constructor(private readonly pi: Json) {}

	private start(cwd: string): void {
		const [cmd, ...args] = bridgeCommand();
		const child = spawn(cmd, args, { cwd, stdio: ["pipe", "pipe", "pipe"], env: process.env });
		this.child = child;
		child.stdout.setEncoding("utf8");
		child.stdout.on("data", (chunk: string) => this.onData(chunk));
		child.stderr.on("data", () => {}); // free-form logging; never block on a full pipe
		child.on("error", (err) => this.fail(`cannot start ${cmd}: ${err.message}`));
		// "close", not "exit": a result written just before exiting is still read first.
		child.on("close", (code, signal) => this.fail(`bridge exited (${signal ?? code})`));
		child.stdin.on("error", () => {}); // EPIPE after a crash: reported through "close"
	}

	private fail(reason: string): void {
		if (this.dead) return;
		this.dead = reason;
		const waiting = this.waiting;
		this.waiting = undefined;
		waiting?.reject(new Error(reason));
	}

	private warnOnce(ctx: Ctx, reason: string): void {
		if (this.warned) return;
		this.warned = true;
		const text = `Rewind: bridge unavailable (${reason}); continuing without rewind`;
		if (ctx?.hasUI) ctx.ui.notify(text, "warning");
		else process.stderr.write(`${text}\n`);
	}

	private write(message: Json): void {
		if (this.child && !this.child.stdin.destroyed) this.child.stdin.write(`${JSON.stringify(message)}\n`);
	}

	private onData(chunk: string): void {
		this.buffer += chunk;
		let newline: number;
		while ((newline = this.buffer.indexOf("\n")) >= 0) {
			const line = this.buffer.slice(0, newline).replace(/\r$/, "");
			this.buffer = this.buffer.slice(newline + 1);
			if (line.trim()) void this.onMessage(line);
		}
	}

	private async onMessage(line: string): Promise<void> {
		let message: Json;
		try {
			message = JSON.parse(line);
		} catch {
			return; // not protocol output
		}
		const waiting = this.waiting;
		if (message.type === "call") {
			if (!waiting) {
				this.write({ type: "reply", id: message.id, error: "no event in flight" });
				return;
			}
			// A menu waits for the user: that time does not count against the bridge's deadline.
			const interactive = message.method === "select";
			if (interactive) waiting.deadline.pause();
			try {
				const result = await this.answer(message.method, message.params ?? {}, waiting.ctx);
				this.write({ type: "reply", id: message.id, result });
			} catch (err: any) {
				this.write({ type: "reply", id: message.id, error: String(err?.message ?? err) });
			} finally {
				if (interactive && this.waiting === waiting) waiting.deadline.resume();
			}
			return;
		}
		if ((message.type === "result" || message.type === "error") && waiting && message.id === waiting.id) {
			this.waiting = undefined;
			waiting.resolve(message);
		}
	}

	private async answer(method: string, params: Json, ctx: Ctx): Promise<Json> {
		const sm = ctx.sessionManager;
		if (method === "session") {
			const entries = sm.getEntries();
			const from = Number(params.from) || 0;
			return {
				header: sm.getHeader(),
				entries: entries.slice(from),
				total: entries.length,
				leafId: sm.getLeafId() ?? null,
				sessionFile: sm.getSessionFile() ?? null,
			};
		}
		if (method === "appendEntry") {
			this.pi.appendEntry(params.customType, params.data);
			return { entryId: sm.getLeafId() };
		}
		if (method === "select") {
			if (!ctx.hasUI) return { choice: null };
			const choice = await ctx.ui.select(params.title, params.options);
			return { choice: choice ?? null };
		}
		throw new Error(`unknown call ${method}`);
	}

	/** Forward one event; events are serialized (one in flight at a time). */
	send(event: string, payload: Json, ctx: Ctx): Promise<Json | undefined> {
		const run = this.queue.then(() => this.sendNow(event, payload, ctx));
		this.queue = run.catch(() => undefined);
		return run;
	}

	private async sendNow(event: string, payload: Json, ctx: Ctx): Promise<Json | undefined> {
		if (ctx) this.lastCtx = ctx;
		ctx = ctx ?? this.lastCtx;
		if (this.closed || !ctx) return undefined;
		if (this.dead) {
			this.warnOnce(ctx, this.dead); // it died between two events
			return undefined;
		}
		try {
			if (!this.child) this.start(ctx.cwd);
			const id = this.nextId++;
			const sm = ctx.sessionManager;
			const reply: Json = await new Promise((resolve, reject) => {
				const deadline = new Deadline(TIMEOUT_MS, () => {
					this.fail(`no answer to ${event} within ${TIMEOUT_MS} ms`);
					this.child?.kill("SIGKILL");
				});
				this.waiting = {
					id,
					ctx,
					deadline,
					resolve: (m) => (deadline.clear(), resolve(m)),
					reject: (e) => (deadline.clear(), reject(e)),
				};
				this.write({
					type: "event",
					id,
					event,
					payload,
					ctx: { hasUI: !!ctx.hasUI, cwd: ctx.cwd, sessionFile: sm.getSessionFile() ?? null, leafId: sm.getLeafId() ?? null },
				});
			});
			if (reply.type === "error") {
				const text = `Rewind: ${reply.error?.message ?? "bridge error"} (${event})`;
				if (ctx.hasUI) ctx.ui.notify(text, "warning");
				else process.stderr.write(`${text}\n`);
				return undefined;
			}
			if (ctx.hasUI) {
				for (const notice of reply.notices ?? []) ctx.ui.notify(notice.text, notice.level);
				ctx.ui.setStatus("rewind", reply.status ?? undefined);
			}
			const result = reply.result ?? {};
			return Object.keys(result).length > 0 ? result : undefined;
		} catch (err: any) {
			this.warnOnce(ctx, String(err?.message ?? err));
			return undefined;
		}
	}

	/** After session_shutdown: close stdin (the bridge exits on EOF); kill it if it lingers. */
	close(): void {
		this.closed = true;
		const child = this.child;
		if (!child) return;
		child.stdin.end();
		const timer = setTimeout(() => {
			if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
		}, 10000);
		timer.unref(); // never keeps Pi's process alive
	}
}

export default function rewindLedger(pi: Json): void {
	const bridge = new Bridge(pi);
	const unsubscribe: unknown[] = [];
	const forward = (event: string, payload: (e: Json) => Json) => (e: Json, ctx: Ctx) => bridge.send(event, payload(e), ctx);

	pi.on("session_start", forward("session_start", (e) => ({ reason: e.reason, previousSessionFile: e.previousSessionFile ?? null })));
	// Pi runs the agent ahead of the extension event queue: a tool may run before our turn_start
	// handler (the pre-prompt snapshot) has finished, unless a tool_call handler exists, in which
	// case Pi waits for the queue before every tool call. This no-op handler buys exactly that.
	pi.on("tool_call", () => undefined);
	// Pi 0.73.1's print mode disposes the session when the agent stops, while the queued
	// message_end / turn_end / agent_end events may still be on their way to us: shutdown waits
	// for the open prompt's agent_end (bounded), so its rewind-turn record is not lost.
	let promptOpen: Promise<void> | undefined;
	let closePrompt: (() => void) | undefined;
	pi.on("before_agent_start", async (e: Json, ctx: Ctx) => {
		promptOpen = new Promise((resolve) => (closePrompt = resolve));
		await bridge.send("before_agent_start", { prompt: e.prompt }, ctx);
		return undefined; // the engine adds nothing to the prompt
	});
	pi.on("turn_start", forward("turn_start", (e) => ({ turnIndex: e.turnIndex })));
	pi.on("message_end", async (e: Json, ctx: Ctx) => {
		await bridge.send("message_end", { role: e.message?.role ?? null }, ctx);
		return undefined; // never replace the message
	});
	pi.on("turn_end", forward("turn_end", (e) => ({
		turnIndex: e.turnIndex,
		role: e.message?.role ?? null,
		message: e.message ? { role: e.message.role, timestamp: e.message.timestamp } : null,
	})));
	pi.on("agent_end", async (_e: Json, ctx: Ctx) => {
		await bridge.send("agent_end", {}, ctx);
		promptOpen = undefined;
		closePrompt?.();
	});
	pi.on("session_compact", forward("session_compact", (e) => ({ compactionEntryId: e.compactionEntry?.id ?? null })));
	pi.on("session_before_tree", forward("session_before_tree", (e) => ({
		targetId: e.preparation?.targetId ?? null,
		userWantsSummary: !!e.preparation?.userWantsSummary,
	})));
	pi.on("session_tree", forward("session_tree", (e) => ({
		newLeafId: e.newLeafId ?? null,
		oldLeafId: e.oldLeafId ?? null,
		summaryEntryId: e.summaryEntry?.id ?? null,
	})));
	pi.on("session_before_fork", forward("session_before_fork", (e) => ({ entryId: e.entryId, position: e.position ?? "before" })));
	pi.on("session_shutdown", async (e: Json, ctx: Ctx) => {
		if (promptOpen) {
			let timer: ReturnType<typeof setTimeout> | undefined;
			await Promise.race([promptOpen, new Promise((resolve) => (timer = setTimeout(resolve, 30000)))]);
			clearTimeout(timer); // a pending timer would keep Pi's process alive
		}
		for (const off of unsubscribe.splice(0)) if (typeof off === "function") off();
		await bridge.send("session_shutdown", { reason: e.reason, targetSessionFile: e.targetSessionFile ?? null }, ctx);
		bridge.close();
	});
	// The reference's event-bus hooks, for other extensions (no ctx: the last one seen is used).
	// The bus outlives this instance (/new, /fork, /reload start a fresh one): unsubscribe at shutdown.
	unsubscribe.push(
		pi.events?.on?.("rewind:checkpoint-entry", (data: Json) =>
			bridge.send("checkpoint_entry", { entryId: data?.entryId, source: data?.source ?? null }, undefined)),
		pi.events?.on?.("rewind:fork-preference", (data: Json) =>
			bridge.send("fork_preference", { mode: data?.mode, source: data?.source }, undefined)),
	);
}
