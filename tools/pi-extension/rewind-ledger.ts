/**
 * rewind-ledger for Pi: runs the rewind engine of the `ledger` Python package inside Pi.
 *
 * Install: `pi install /path/to/rewind-ledger` (or `pi install git:<host>/<org>/<repo>`): the
 * package's `pi` manifest loads this file. One run: `pi -e /path/to/rewind-ledger.ts`.
 * It replaces pi-rewind-hook: same records, same menus, defects fixed. If pi-rewind-hook (or a
 * second copy of this extension) is active too, it warns once and stands aside.
 *
 * This file is deliberately thin: it starts `rewind serve --stdio` (the bridge), forwards Pi's
 * events to it, answers the bridge's calls (session facts, pi.appendEntry, ctx.ui.select), and
 * shows what the engine returns (notices, the footer status, a panel that says what a rewind
 * action did, cancel). Every rewind decision is made by the engine. Protocol: README "The bridge
 * protocol" and schemas/bridge.schema.json of rewind-ledger.
 *
 * Safety: Pi owns the session file while it runs; every record goes through pi.appendEntry.
 * If the bridge cannot start, dies (during or between events) or stops answering
 * (REWIND_BRIDGE_TIMEOUT_MS, default 120 s per event, not counting time in a menu), the
 * extension warns once, quoting the bridge's last stderr lines with a hint, clears its footer,
 * and Pi carries on without rewind.
 *
 * Bridge command: $REWIND_BRIDGE_CMD (a JSON array of argv) if set; else the package's own venv
 * (`<package>/.rewind-venv`, created on first use when the package ships the Python sources
 * and no `rewind` is on PATH); else `rewind serve --stdio` from PATH; else
 * `python3 -m ledger serve --stdio`.
 *
 * Hosted sessions: when the repository's watcher runs (`rewind serve --watch`, or the one a
 * bridge starts with rewind.snapshot.autoWatchSeconds), the extension first asks it to host the
 * session: it connects to `<git-dir>/pi-rewind/bridge.sock`, says hello (repository and
 * environment) and, if accepted, speaks the same protocol on that connection, with no process
 * to start (docs/capture.md#hosted-sessions). Declined, absent or broken: the bridge command
 * above. If the watcher ends mid-session, the next event starts the bridge command.
 * REWIND_HOSTED=0 turns hosting off.
 */

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";

type Level = "info" | "warning" | "error";
type Params = Record<string, unknown>;
interface Notice {
	level: Level;
	text: string;
}
interface ResultMessage {
	type: "result";
	id: number;
	result?: { cancel?: boolean; skipConversationRestore?: boolean };
	notices?: Notice[];
	status?: string | null;
	panel?: string[];
}
interface ErrorMessage {
	type: "error";
	id: number | null;
	error?: { code?: string; message?: string };
}
interface CallMessage {
	type: "call";
	id: string;
	method: string;
	params?: Params;
}
type FromBridge = ResultMessage | ErrorMessage | CallMessage;
type EventResult = { cancel?: boolean; skipConversationRestore?: boolean };

const TIMEOUT_MS = Number(process.env.REWIND_BRIDGE_TIMEOUT_MS ?? "120000") || 120000;
const CLOSE_GRACE_MS = Number(process.env.REWIND_BRIDGE_CLOSE_MS ?? "5000") || 5000;
const STDERR_LINES = 6;
const KEY = "rewind";
const HELLO_MS = Number(process.env.REWIND_HOSTED_HELLO_MS ?? "1000") || 1000;
const DISCOVERY_ENV = ["GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM"];
const ENV_PREFIXES = ["GIT_", "REWIND_", "PI_", "XDG_", "LC_", "PYTHON"];
const ENV_KEYS = new Set(["HOME", "EMAIL", "PATH", "LANG", "LANGUAGE", "TZ", "USER"]);
// Pi sets these in its own process for its children; the engine reads neither.
const ENV_IGNORED = new Set(["PI_CODING_AGENT", "PI_SKIP_VERSION_CHECK"]);

/** What the bridge's behaviour depends on in the environment: the same keys as bridge_env in
 * ledger/bridge/hosted.py (a watcher hosts only a session whose values equal its own). */
function bridgeEnv(): Record<string, string> {
	const env: Record<string, string> = {};
	for (const [key, value] of Object.entries(process.env)) {
		if (value === undefined || ENV_IGNORED.has(key)) continue;
		if (ENV_KEYS.has(key) || ENV_PREFIXES.some((prefix) => key.startsWith(prefix))) env[key] = value;
	}
	return env;
}

/** Work tree and git dir as git finds them from `cwd`, resolved (find_repository in
 * ledger/bridge/snapshot_socket.py); undefined when the environment redirects discovery. */
function findRepository(cwd: string): { root: string; gitDir: string } | undefined {
	if (DISCOVERY_ENV.some((key) => key in process.env)) return undefined;
	let here: string;
	try {
		here = fs.realpathSync.native(cwd);
	} catch {
		return undefined;
	}
	for (let dir = here; ; dir = path.dirname(dir)) {
		const dotgit = path.join(dir, ".git");
		try {
			const info = fs.statSync(dotgit);
			if (info.isDirectory()) return { root: dir, gitDir: fs.realpathSync.native(dotgit) };
			if (info.isFile()) {
				const text = fs.readFileSync(dotgit, "utf8").trim();
				if (!text.startsWith("gitdir:")) return undefined;
				return { root: dir, gitDir: fs.realpathSync.native(path.resolve(dir, text.slice("gitdir:".length).trim())) };
			}
		} catch {
			// no .git here
		}
		if (path.dirname(dir) === dir) return undefined;
	}
}

/** A connection on which the repository's watcher hosts this session, or undefined. */
async function connectHosted(cwd: string): Promise<{ socket: net.Socket; rest: string } | undefined> {
	if (process.env.REWIND_HOSTED === "0" || process.platform !== "linux" || !process.getuid) return undefined;
	const repo = findRepository(cwd);
	if (!repo) return undefined;
	const where = path.join(repo.gitDir, "pi-rewind", "bridge.sock");
	try {
		// Safety: only a socket of ours, in a directory nobody else may write (where it could
		// be swapped between this check and the connect).
		const uid = process.getuid();
		const dir = fs.lstatSync(path.dirname(where));
		if (!dir.isDirectory() || dir.uid !== uid || (dir.mode & 0o022) !== 0) return undefined;
		const sock = fs.lstatSync(where);
		if (!sock.isSocket() || sock.uid !== uid) return undefined;
	} catch {
		return undefined; // no watcher listens here
	}
	return new Promise((resolve) => {
		const socket = net.createConnection(where);
		socket.setEncoding("utf8");
		let buffer = "";
		let settled = false;
		const settle = (accepted: boolean, rest = "") => {
			if (settled) return;
			settled = true;
			clearTimeout(timer);
			socket.off("data", onData);
			socket.off("error", refuse);
			socket.off("close", refuse);
			if (!accepted) socket.destroy();
			resolve(accepted ? { socket, rest } : undefined);
		};
		const refuse = () => settle(false);
		const onData = (chunk: string) => {
			buffer += chunk;
			const newline = buffer.indexOf("\n");
			if (newline < 0) return;
			let accepted = false;
			try {
				accepted = JSON.parse(buffer.slice(0, newline)).ok === true;
			} catch {
				// not an answer we know
			}
			settle(accepted, buffer.slice(newline + 1));
		};
		const timer = setTimeout(refuse, HELLO_MS);
		socket.on("data", onData);
		socket.on("error", refuse);
		socket.on("close", refuse);
		socket.on("connect", () => {
			socket.write(`${JSON.stringify({ v: 1, op: "bridge", root: repo.root, gitDir: repo.gitDir, env: bridgeEnv() })}\n`);
		});
	});
}

/** The other end of the protocol: a bridge process of our own, or a session on the watcher. */
interface Transport {
	write(text: string): void;
	end(): void;
	kill(): void;
	/** Settles once the other end is gone and everything it wrote was read. */
	exited: Promise<void>;
}

/** The watcher that hosted this session ended (not the bridge failing): start one's own. */
class HostedLost extends Error {}

/** The directory of this package (the checkout or the installed package), if we can tell. */
function packageRoot(): string | undefined {
	let here: string | undefined;
	try {
		here = path.dirname(fileURLToPath(import.meta.url));
	} catch {
		here = typeof __dirname === "string" ? __dirname : undefined;
	}
	for (let dir = here; dir && path.dirname(dir) !== dir; dir = path.dirname(dir)) {
		if (fs.existsSync(path.join(dir, "pyproject.toml")) && fs.existsSync(path.join(dir, "ledger", "__main__.py"))) return dir;
	}
	return undefined;
}

function packageVersion(root: string): string {
	try {
		return String(JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).version ?? "0");
	} catch {
		return "0";
	}
}

function onPath(name: string): string | undefined {
	for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
		if (!dir) continue;
		const candidate = path.join(dir, name);
		try {
			fs.accessSync(candidate, fs.constants.X_OK);
			return candidate;
		} catch {
			// not here
		}
	}
	return undefined;
}

/** How the bridge is started: a ready command, or a venv to set up first. */
type Plan = { argv: string[]; setup?: { root: string; venv: string } };

function bridgePlan(): Plan {
	const configured = process.env.REWIND_BRIDGE_CMD;
	if (configured) {
		const argv: unknown = JSON.parse(configured);
		if (Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === "string")) return { argv: argv as string[] };
		throw new Error("REWIND_BRIDGE_CMD must be a JSON array of strings");
	}
	const root = packageRoot();
	const venv = root ? path.join(root, ".rewind-venv") : undefined;
	const local = venv ? path.join(venv, "bin", "rewind") : undefined;
	if (root && venv && local && fs.existsSync(local)) {
		const stamp = path.join(venv, "rewind-ledger.version");
		const fresh = fs.existsSync(stamp) && fs.readFileSync(stamp, "utf8").trim() === packageVersion(root);
		return { argv: [local, "serve", "--stdio"], setup: fresh ? undefined : { root, venv } };
	}
	const global = onPath("rewind");
	if (global) return { argv: [global, "serve", "--stdio"] };
	if (root && venv && local) return { argv: [local, "serve", "--stdio"], setup: { root, venv } };
	return { argv: ["python3", "-m", "ledger", "serve", "--stdio"] };
}

const HINT =
	"hint: install the Python side with `pip install /path/to/rewind-ledger` (puts `rewind` on PATH), " +
	'or point REWIND_BRIDGE_CMD at it, e.g. REWIND_BRIDGE_CMD=\'["/path/to/venv/bin/rewind","serve","--stdio"]\'';

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

type Waiting = {
	id: number;
	resolve: (m: ResultMessage | ErrorMessage) => void;
	reject: (e: Error) => void;
	ctx: ExtensionContext;
	deadline: Deadline;
};

function show(ctx: ExtensionContext | undefined, text: string, level: Level): void {
	try {
		if (ctx?.hasUI) ctx.ui.notify(text, level);
		else process.stderr.write(`${text}\n`);
	} catch {
		process.stderr.write(`${text}\n`); // a stale ctx (the session was replaced)
	}
}

class Bridge {
	private transport: Transport | undefined;
	private buffer = "";
	private stderr: string[] = [];
	private stderrPartial = "";
	private nextId = 1;
	private waiting: Waiting | undefined;
	private queue: Promise<unknown> = Promise.resolve();
	/** Why the bridge is unusable (it could not start, exited, or did not answer in time). */
	dead: string | undefined;
	/** session_shutdown was forwarded and stdin closed: the bridge's exit is expected. */
	private closed = false;
	private warned = false;
	lastCtx: ExtensionContext | undefined;

	constructor(private readonly pi: ExtensionAPI) {}

	/** Create the package's venv and pip-install the package into it, showing progress. */
	private async setUp(root: string, venv: string, ctx: ExtensionContext): Promise<void> {
		const progress = (line: string) => {
			const text = `Rewind: setting up its Python side in ${venv} (first run only): ${line}`;
			if (ctx.hasUI) ctx.ui.setWidget(KEY, [text]);
			else process.stderr.write(`${text}\n`);
		};
		const python = process.env.REWIND_PYTHON ?? "python3";
		const run = (cmd: string, args: string[], what: string) =>
			new Promise<void>((resolve, reject) => {
				progress(what);
				const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: process.env });
				const tail: string[] = [];
				const onLine = (chunk: Buffer) => {
					for (const line of chunk.toString("utf8").split(/\r?\n/)) {
						if (!line.trim()) continue;
						tail.push(line.trim());
						if (tail.length > STDERR_LINES) tail.shift();
						if (/^(Collecting|Installing|Successfully|Building|Processing)/.test(line.trim())) progress(line.trim().slice(0, 100));
					}
				};
				child.stdout.on("data", onLine);
				child.stderr.on("data", onLine);
				child.on("error", (err) => reject(new Error(`cannot run ${cmd}: ${err.message}`)));
				child.on("close", (code) =>
					code === 0 ? resolve() : reject(new Error(`${what} failed (exit ${code}): ${tail.join(" | ")}`)));
			});
		if (!fs.existsSync(path.join(venv, "bin", "python"))) await run(python, ["-m", "venv", venv], "creating the venv");
		await run(path.join(venv, "bin", "python"), ["-m", "pip", "install", "--disable-pip-version-check", "-q", "--progress-bar", "off", root],
			"pip install (pygit2, orjson, pydantic, …)");
		fs.writeFileSync(path.join(venv, "rewind-ledger.version"), `${packageVersion(root)}\n`);
		if (ctx.hasUI) ctx.ui.setWidget(KEY, [`Rewind: Python side ready (${venv})`]);
	}

	/** The next start first creates the package's venv (minutes, not milliseconds). */
	willSetUp(): boolean {
		try {
			return !this.transport && !this.dead && bridgePlan().setup !== undefined;
		} catch {
			return false;
		}
	}

	private async start(ctx: ExtensionContext): Promise<void> {
		const hosted = await connectHosted(ctx.cwd);
		if (hosted) return this.attach(hosted.socket, hosted.rest);
		const plan = bridgePlan();
		if (plan.setup) await this.setUp(plan.setup.root, plan.setup.venv, ctx);
		const [cmd, ...args] = plan.argv;
		const child: ChildProcessWithoutNullStreams = spawn(cmd, args, { cwd: ctx.cwd, stdio: ["pipe", "pipe", "pipe"], env: process.env });
		child.stdout.setEncoding("utf8");
		child.stdout.on("data", (chunk: string) => this.onData(chunk));
		child.stderr.setEncoding("utf8");
		child.stderr.on("data", (chunk: string) => this.onStderr(chunk)); // never block on a full pipe
		child.on("error", (err) => this.fail(`cannot start ${cmd}: ${err.message}`));
		// "close", not "exit": a result written just before exiting is still read first.
		const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
		child.on("close", (code, signal) => this.fail(`bridge exited (${signal ?? code})`));
		child.stdin.on("error", () => {}); // EPIPE after a crash: reported through "close"
		this.transport = {
			write: (text) => {
				if (!child.stdin.destroyed) child.stdin.write(text);
			},
			end: () => child.stdin.end(),
			kill: () => {
				if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
			},
			exited,
		};
	}

	/** Speak the protocol on a connection the watcher accepted to host this session. */
	private attach(socket: net.Socket, rest: string): void {
		const exited = new Promise<void>((resolve) => socket.on("close", () => resolve()));
		const transport: Transport = {
			write: (text) => {
				if (!socket.destroyed) socket.write(text);
			},
			end: () => socket.end(),
			kill: () => socket.destroy(),
			exited,
		};
		this.transport = transport;
		socket.on("data", (chunk: string) => this.onData(chunk));
		socket.on("error", () => {}); // reported through "close"
		socket.on("close", () => this.lose(transport));
		if (rest) this.onData(rest);
	}

	/** The watcher hosting this session is gone: the next event starts a bridge of our own. */
	private lose(transport: Transport): void {
		if (this.transport !== transport || this.closed || this.dead) return;
		this.transport = undefined;
		this.buffer = "";
		const waiting = this.waiting;
		this.waiting = undefined;
		if (waiting) waiting.reject(new HostedLost("the watcher hosting this session ended"));
	}

	private onStderr(chunk: string): void {
		const lines = (this.stderrPartial + chunk).split(/\r?\n/);
		this.stderrPartial = lines.pop() ?? "";
		for (const line of lines) if (line.trim()) this.stderr.push(line);
		if (this.stderr.length > STDERR_LINES) this.stderr.splice(0, this.stderr.length - STDERR_LINES);
	}

	private fail(reason: string): void {
		if (this.dead) return;
		this.dead = reason;
		const waiting = this.waiting;
		this.waiting = undefined;
		if (waiting) waiting.reject(new Error(reason));
		else if (!this.closed) this.warnOnce(this.lastCtx, reason); // it died between two events
	}

	private warnOnce(ctx: ExtensionContext | undefined, reason: string): void {
		if (this.warned) return;
		this.warned = true;
		if (this.stderrPartial.trim()) this.stderr.push(this.stderrPartial);
		const tail = this.stderr.slice(-3).map((line) => `  ${line.slice(0, 300)}`);
		const text = [`Rewind: bridge unavailable (${reason}); continuing without rewind`,
			...(tail.length ? ["bridge stderr (last lines):", ...tail] : []), HINT].join("\n");
		show(ctx, text, "warning");
		try {
			if (ctx?.hasUI) {
				ctx.ui.setStatus(KEY, undefined);
				ctx.ui.setWidget(KEY, undefined);
			}
		} catch {
			// stale ctx
		}
	}

	private write(message: object): void {
		this.transport?.write(`${JSON.stringify(message)}\n`);
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
		let message: FromBridge;
		try {
			message = JSON.parse(line) as FromBridge;
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
			} catch (err) {
				this.write({ type: "reply", id: message.id, error: err instanceof Error ? err.message : String(err) });
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

	private async answer(method: string, params: Params, ctx: ExtensionContext): Promise<unknown> {
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
			this.pi.appendEntry(String(params.customType), params.data);
			return { entryId: sm.getLeafId() };
		}
		if (method === "select") {
			if (!ctx.hasUI) return { choice: null };
			const options = Array.isArray(params.options) ? params.options.map(String) : [];
			const choice = await ctx.ui.select(String(params.title ?? ""), options);
			return { choice: choice ?? null };
		}
		throw new Error(`unknown call ${method}`);
	}

	/** Forward one event; events are serialized (one in flight at a time). */
	send(event: string, payload: Params, ctx: ExtensionContext | undefined): Promise<EventResult | undefined> {
		const run = this.queue.then(() => this.sendNow(event, payload, ctx));
		this.queue = run.catch(() => undefined);
		return run;
	}

	private async sendNow(event: string, payload: Params, given: ExtensionContext | undefined): Promise<EventResult | undefined> {
		if (given) this.lastCtx = given;
		const ctx = given ?? this.lastCtx;
		if (this.closed || !ctx) return undefined;
		if (this.dead) {
			this.warnOnce(ctx, this.dead);
			return undefined;
		}
		try {
			if (!this.transport) await this.start(ctx); // a first-run setup is not timed
			if (this.dead) throw new Error(this.dead);
			const id = this.nextId++;
			const sm = ctx.sessionManager;
			const reply = await new Promise<ResultMessage | ErrorMessage>((resolve, reject) => {
				const deadline = new Deadline(TIMEOUT_MS, () => {
					this.fail(`no answer to ${event} within ${TIMEOUT_MS} ms`);
					this.transport?.kill();
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
				show(ctx, `Rewind: ${reply.error?.message ?? "bridge error"} (${event})`, "warning");
				return undefined;
			}
			if (ctx.hasUI) {
				for (const notice of reply.notices ?? []) ctx.ui.notify(notice.text, notice.level);
				if ("status" in reply) ctx.ui.setStatus(KEY, reply.status ?? undefined);
				// The panel stays above the editor through Pi's redraw after /tree and /fork.
				if (reply.panel) ctx.ui.setWidget(KEY, reply.panel.length > 0 ? reply.panel : undefined);
			} else {
				for (const notice of reply.notices ?? []) if (notice.level !== "info") show(ctx, notice.text, notice.level);
			}
			const result = reply.result ?? {};
			return Object.keys(result).length > 0 ? result : undefined;
		} catch (err) {
			if (err instanceof HostedLost) {
				// Not a failure of rewind: what this event would have recorded is missing; the
				// next event starts a bridge of this session's own.
				show(ctx, `Rewind: ${err.message} during ${event}; the next event starts this session's own bridge`, "warning");
				return undefined;
			}
			this.warnOnce(ctx, err instanceof Error ? err.message : String(err));
			return undefined;
		}
	}

	/** After session_shutdown: close stdin (the bridge exits on EOF), wait briefly, then kill. */
	async close(): Promise<void> {
		this.closed = true;
		const transport = this.transport;
		if (!transport) return;
		transport.end();
		let timer: ReturnType<typeof setTimeout> | undefined;
		const gone = await Promise.race([
			transport.exited.then(() => true),
			new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS))),
		]);
		clearTimeout(timer); // a pending timer would keep Pi's process alive
		if (!gone) transport.kill();
	}
}

/** One active copy per Pi process: a second copy of this extension stays off and says so. */
const CLAIM = Symbol.for("rewind-ledger.active-instance");
type Claims = { [CLAIM]?: { token: object; where: string } };

const SECOND_COPY =
	"Rewind: rewind-ledger is loaded twice ({first} and {second}); this copy stays off so that each " +
	"prompt is recorded once. Keep one: remove the other from ~/.pi/agent/extensions/ or from \"packages\" " +
	"in ~/.pi/agent/settings.json (pi remove <source>), or drop the extra -e.";

function here(): string {
	try {
		return fileURLToPath(import.meta.url);
	} catch {
		return typeof __filename === "string" ? __filename : "rewind-ledger.ts";
	}
}

export default function rewindLedger(pi: ExtensionAPI): void {
	const claims = globalThis as unknown as Claims;
	const token = {};
	const claimed = claims[CLAIM];
	if (claimed) {
		pi.on("session_start", (_e, ctx) => {
			show(ctx, SECOND_COPY.replace("{first}", claimed.where).replace("{second}", here()), "warning");
		});
		return;
	}
	claims[CLAIM] = { token, where: here() };
	const release = () => {
		if (claims[CLAIM]?.token === token) delete claims[CLAIM];
	};

	const bridge = new Bridge(pi);
	const unsubscribe: Array<() => void> = [];

	pi.on("session_start", async (e, ctx) => {
		const started = bridge.send("session_start", { reason: e.reason, previousSessionFile: e.previousSessionFile ?? null }, ctx);
		// A first-run setup of the Python side must not hold up Pi's start: not awaited then (the
		// events that follow wait for it in the bridge's queue).
		if (!bridge.willSetUp()) await started;
	});
	// Pi runs the agent ahead of the extension event queue: a tool may run before our turn_start
	// handler (the pre-prompt snapshot) has finished, unless a tool_call handler exists, in which
	// case Pi waits for the queue before every tool call. This no-op handler buys exactly that.
	pi.on("tool_call", () => undefined);
	// Pi 0.73.1's print mode disposes the session when the agent stops, while the queued
	// message_end / turn_end / agent_end events may still be on their way to us: shutdown waits
	// for the open prompt's agent_end (bounded), so its rewind-turn record is not lost.
	let promptOpen: Promise<void> | undefined;
	let closePrompt: (() => void) | undefined;
	pi.on("before_agent_start", async (e, ctx) => {
		promptOpen = new Promise((resolve) => (closePrompt = resolve));
		await bridge.send("before_agent_start", { prompt: e.prompt }, ctx);
		return undefined; // the engine adds nothing to the prompt
	});
	pi.on("turn_start", async (e, ctx) => {
		await bridge.send("turn_start", { turnIndex: e.turnIndex }, ctx);
	});
	pi.on("message_end", async (e, ctx) => {
		await bridge.send("message_end", { role: e.message?.role ?? null }, ctx);
		return undefined; // never replace the message
	});
	pi.on("turn_end", async (e, ctx) => {
		const message = e.message as { role?: string; timestamp?: number } | undefined;
		await bridge.send("turn_end", {
			turnIndex: e.turnIndex,
			role: message?.role ?? null,
			message: message ? { role: message.role, timestamp: message.timestamp } : null,
		}, ctx);
	});
	pi.on("agent_end", async (_e, ctx) => {
		await bridge.send("agent_end", {}, ctx);
		promptOpen = undefined;
		closePrompt?.();
	});
	pi.on("session_compact", async (e, ctx) => {
		await bridge.send("session_compact", { compactionEntryId: e.compactionEntry?.id ?? null }, ctx);
	});
	pi.on("session_before_tree", async (e, ctx) =>
		bridge.send("session_before_tree", {
			targetId: e.preparation?.targetId ?? null,
			userWantsSummary: !!e.preparation?.userWantsSummary,
		}, ctx));
	pi.on("session_tree", async (e, ctx) => {
		await bridge.send("session_tree", {
			newLeafId: e.newLeafId ?? null,
			oldLeafId: e.oldLeafId ?? null,
			summaryEntryId: e.summaryEntry?.id ?? null,
		}, ctx);
	});
	pi.on("session_before_fork", async (e, ctx) => {
		const result = await bridge.send("session_before_fork", { entryId: e.entryId, position: e.position ?? "before" }, ctx);
		return result?.cancel ? { cancel: true } : undefined; // Pi 0.73.1 honours only `cancel` here
	});
	pi.on("session_shutdown", async (e, ctx) => {
		if (promptOpen) {
			let timer: ReturnType<typeof setTimeout> | undefined;
			await Promise.race([promptOpen, new Promise((resolve) => (timer = setTimeout(resolve, 30000)))]);
			clearTimeout(timer); // a pending timer would keep Pi's process alive
		}
		for (const off of unsubscribe.splice(0)) off();
		await bridge.send("session_shutdown", { reason: e.reason, targetSessionFile: e.targetSessionFile ?? null }, ctx);
		await bridge.close();
		release();
	});
	// The reference's event-bus hooks, for other extensions (no ctx: the last one seen is used).
	// The bus outlives this instance (/new, /fork, /reload start a fresh one): unsubscribe at shutdown.
	const data = (value: unknown) => (value ?? {}) as Params;
	unsubscribe.push(
		pi.events.on("rewind:checkpoint-entry", (value) => {
			const d = data(value);
			void bridge.send("checkpoint_entry", { entryId: d.entryId, source: d.source ?? null }, undefined);
		}),
		pi.events.on("rewind:fork-preference", (value) => {
			const d = data(value);
			void bridge.send("fork_preference", { mode: d.mode, source: d.source }, undefined);
		}),
	);
}
