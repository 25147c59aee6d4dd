/**
 * rewind-ledger for Pi: runs the rewind engine of the `ledger` Python package inside Pi.
 *
 * Install: `pi install /path/to/rewind-ledger` (or `pi install git:<host>/<org>/<repo>`): the
 * package's `pi` manifest loads this file. One run: `pi -e /path/to/rewind-ledger.ts`.
 * It replaces pi-rewind-hook: same records, same menus, defects fixed. If pi-rewind-hook (or a
 * second copy of this extension) is active too, it warns once at session start and stands aside.
 *
 * This file is deliberately thin: it starts `rewind serve --stdio` (the bridge), forwards Pi's
 * events to it, answers the bridge's calls (session facts, pi.appendEntry, ctx.ui.select), and
 * shows what the engine returns (notices, the footer status, a panel that says what a rewind
 * action did, cancel). Every rewind decision is made by the engine. Protocol: README "The bridge
 * protocol" and schemas/bridge.schema.json of rewind-ledger.
 *
 * Safety: Pi owns the session file while it runs; every record goes through pi.appendEntry.
 *
 * Healing: a bridge that dies (exits, is killed, its hosted connection drops, or it does not
 * answer an event within REWIND_BRIDGE_TIMEOUT_MS, default 120 s not counting time in a menu,
 * and is then killed) is restarted at the next event: the new bridge first gets this session's
 * session_start again (it rebuilds its state from the session), then that event. Only what was
 * in flight is lost (a running prompt's record lives in the bridge's memory until agent_end); one
 * warning names it and says rewind runs again. Restarts are bounded (see BACKOFF_MS,
 * MAX_FAILED_STARTS, MAX_DEATHS): past them the extension warns once with the real cause (the
 * bridge's last stderr lines) and a hint for that cause, clears its footer, and Pi carries on
 * without rewind until /reload. A bridge is never started just to end it (session_shutdown).
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
 * above. If the watcher ends mid-session, that is healed like a death (the next event tries
 * the watcher again, else starts the bridge command). REWIND_HOSTED=0 turns hosting off.
 *
 * Another rewind extension: at session_start the extension emits a probe on the event-bus
 * channels pi-rewind-hook listens on (`rewind:fork-preference`, `rewind:checkpoint-entry`);
 * the probe's fields are getters whose values no allow-list accepts, so a listener only reads
 * them and returns. If any other listener read them, ours warns before the first prompt and
 * starts no bridge for that session (docs/defects.md#other-writer); the bridge's own check of
 * foreign records stays as the fallback for writers that do not listen there.
 */

import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { getAgentDir, type ExtensionAPI, type ExtensionContext } from "@mariozechner/pi-coding-agent";
import type { RewindOff } from "./rewind-command.ts";

type Level = "info" | "warning" | "error";
type Params = Record<string, unknown>;
interface Notice {
	level: Level;
	text: string;
}
/** What an event returned to Pi: `cancel`, `skipConversationRestore`, or whatever else a
 * caller of Bridge.send (a command) asks the bridge for. */
type EventResult = Record<string, unknown> & { cancel?: boolean; skipConversationRestore?: boolean };
interface ResultMessage {
	type: "result";
	id: number;
	result?: EventResult;
	notices?: Notice[];
	status?: string | null;
	panel?: string[];
	/** session_start: events this bridge does nothing with (an older bridge sends none). */
	skip?: string[];
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
 * ledger/bridge/session_env.py (a watcher hosts only a session whose values equal its own). */
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
async function connectHosted(cwd: string): Promise<{ socket: net.Socket; rest: string; ahead: boolean } | undefined> {
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
		const settle = (accepted: boolean, rest = "", ahead = false) => {
			if (settled) return;
			settled = true;
			clearTimeout(timer);
			socket.off("data", onData);
			socket.off("error", refuse);
			socket.off("close", refuse);
			if (!accepted) socket.destroy();
			resolve(accepted ? { socket, rest, ahead } : undefined);
		};
		const refuse = () => settle(false);
		const onData = (chunk: string) => {
			buffer += chunk;
			const newline = buffer.indexOf("\n");
			if (newline < 0) return;
			let accepted = false;
			let ahead = false;
			try {
				const answer = JSON.parse(buffer.slice(0, newline));
				accepted = answer.ok === true;
				ahead = answer.ahead === true;
			} catch {
				// not an answer we know
			}
			settle(accepted, buffer.slice(newline + 1), ahead);
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
	/** Lets Pi's process end without waiting for the other end (a connection only). */
	release?(): void;
}

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

const INSTALL_HINT =
	"hint: install the Python side with `pip install /path/to/rewind-ledger` (puts `rewind` on PATH), " +
	'or point REWIND_BRIDGE_CMD at it, e.g. REWIND_BRIDGE_CMD=\'["/path/to/venv/bin/rewind","serve","--stdio"]\'';

// Restarts (a safety bound, not a tuning knob): the first restart after a loss is immediate, so
// a one-off death costs only what was in flight; the next ones wait BACKOFF_MS (by the number
// of losses in the last DEATH_WINDOW_MS), events meanwhile are not forwarded (and named as
// missing). Three failed starts in a row mean the command cannot run (retrying more only delays
// the warning); three deaths of a running bridge within ten minutes mean it crashes on something
// in this session (restarting again would lose a prompt each time and repeat the warning).
const BACKOFF_MS = [0, 1000, 4000];
const MAX_FAILED_STARTS = 3;
const MAX_DEATHS = 3;
const DEATH_WINDOW_MS = 10 * 60 * 1000;
const TURN_TYPE = "rewind-turn";
/** The bridge's other-writer warning (OTHER_WRITER in ledger/bridge/dispatch.py), the same
 * words when this extension notices the other one itself, at session start. */
const OTHER_WRITER =
	"Rewind: another rewind extension is recording this session too (pi-rewind-hook, or a second copy " +
	"of rewind-ledger): rewind-ledger stops recording and shows no menus in this session, so that each " +
	"prompt is recorded once. Keep one: remove the other from ~/.pi/agent/extensions/ or from " +
	'"packages" in ~/.pi/agent/settings.json (pi remove <source>), then restart Pi or run /reload.';
const OTHER_WRITER_PREFIX = "Rewind: another rewind extension is recording this session too";

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

/** Why a bridge ended, for the hint: its command could not run at all, it timed out, or it
 * crashed (anything else). */
type Cause = "missing" | "timeout" | "crash";

/** One bridge the extension speaks to: a process of its own or a session on the watcher. Each
 * has its own buffers, so a late line or exit of an old one never touches the next. */
interface Link {
	transport?: Transport;
	hosted: boolean;
	argv: string[];
	buffer: string;
	stderr: string[];
	stderrPartial: string;
	/** Events it answered; 0 = it has not started (yet). */
	answered: number;
	/** Why it ended (set once). */
	gone?: string;
	cause: Cause;
	/** Its loss was counted (a link ends once; both its exit and the event it failed report it). */
	counted?: boolean;
	/** Session entries it was given (with an event or a reply): the next event sends the rest. */
	mirrored: number;
	/** It takes an event written before the one before it is answered (a watcher that said so
	 * in its hello answer): see Bridge.send. */
	ahead?: boolean;
	/** Events it said it does nothing with (session_start's `skip`): not sent to it. */
	skip: Set<string>;
}

function newLink(hosted: boolean, argv: string[]): Link {
	return { hosted, argv, buffer: "", stderr: [], stderrPartial: "", answered: 0, cause: "crash", mirrored: 0, skip: new Set() };
}

type Session = ExtensionContext["sessionManager"];

/** What a `session` call from `from` would answer, plus `from`: sent with each event (and after
 * an append) so that the bridge need not ask (issue 34, per prompt). A bridge whose mirror does
 * not end at `from` ignores it and asks, as an older bridge always does. */
function sessionFacts(sm: Session, link: Link): Params {
	const entries = sm.getEntries();
	const from = link.mirrored <= entries.length ? link.mirrored : 0;
	link.mirrored = entries.length;
	return {
		from,
		entries: from > 0 ? entries.slice(from) : entries,
		total: entries.length,
		leafId: sm.getLeafId() ?? null,
		sessionFile: sm.getSessionFile() ?? null,
		...(from === 0 ? { header: sm.getHeader() } : {}),
	};
}

/** A bridge that ended, until it is reported: when the next bridge answers, or when restarting
 * stops (too many failures) or Pi ends the session first. */
interface Loss {
	reason: string;
	when: string;
	hosted: boolean;
	/** A bridge of this session had been running (install advice is never right then). */
	ran: boolean;
	/** Start attempts that failed since. */
	failed: number;
	missing: string[];
	/** The latest failure: what the final warning quotes. */
	last: { reason: string; cause: Cause; stderr: string[]; argv: string[] };
}

class LinkGone extends Error {
	constructor(readonly link: Link, readonly appended: string[]) {
		super(link.gone ?? "bridge gone");
	}
}

type Waiting = {
	id: number;
	link: Link;
	resolve: (m: ResultMessage | ErrorMessage) => void;
	reject: (e: Error) => void;
	ctx: ExtensionContext;
	deadline: Deadline;
	/** customTypes appended during this event (a record written before a death is not missing). */
	appended: string[];
};

function show(ctx: ExtensionContext | undefined, text: string, level: Level): void {
	try {
		if (ctx?.hasUI) ctx.ui.notify(text, level);
		else process.stderr.write(`${text}\n`);
	} catch {
		process.stderr.write(`${text}\n`); // a stale ctx (the session was replaced)
	}
}

function clearScreen(ctx: ExtensionContext | undefined): void {
	try {
		if (ctx?.hasUI) {
			ctx.ui.setStatus(KEY, undefined);
			ctx.ui.setWidget(KEY, undefined);
		}
	} catch {
		// stale ctx
	}
}

function exitReason(code: number | null, signal: NodeJS.Signals | null): string {
	return signal ? `killed, ${signal}` : `exit code ${code}`;
}

function plural(n: number, word: string): string {
	return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** What an event would have recorded, in the user's words; "" when it records nothing. */
const MISSING: Record<string, string> = {
	session_compact: "the rewind point of the compaction",
	session_before_tree: "the rewind step of that /tree (its menu or restore; the navigation went ahead)",
	session_tree: "the record of the files at the /tree's new position",
	session_before_fork: "the rewind step of that /fork (its menu or restore; the fork went ahead)",
	checkpoint_entry: "a checkpoint (rewind:checkpoint-entry)",
	fork_preference: "a fork preference (rewind:fork-preference)",
	session_start: "",
	before_agent_start: "",
	turn_start: "",
	message_end: "",
	turn_end: "",
	agent_end: "",
	session_shutdown: "the end-of-session retention sweep",
	ping: "",
};

class Bridge {
	private link: Link | undefined;
	private nextId = 1;
	/** The events written and not answered yet, oldest first. The bridge reads and answers
	 * them in order, so its calls are for the oldest, whose deadline alone runs. */
	private inflight: Waiting[] = [];
	/** Settles once the last event given to {@link send} is written (or found no bridge): the
	 * next one is written after it, without waiting for its answer. */
	private queue: Promise<unknown> = Promise.resolve();
	/** session_shutdown was forwarded and input closed: the bridge's exit is expected. */
	private closed = false;
	/** Rewind is off for this session (restarts gave up, or another rewind extension records). */
	private off: RewindOff | undefined;
	private loss: Loss | undefined;
	private everRan = false;
	private failedStarts = 0;
	private losses: number[] = [];
	private deaths: number[] = [];
	private notBefore = 0;
	/** This session's session_start payload: a restarted bridge gets it first. */
	private startPayload: Params | undefined;
	/** The prompt running now; `recording` once its turn_start(0) went out (its record is then
	 * in the bridge's memory until agent_end). */
	private prompt: { text: string; recording: boolean } | undefined;
	private shown = new Set<string>();
	/** The footer this instance last set, and on which UI: an unchanged footer is not set again
	 * (in RPC mode each setStatus is a message to the client; in the TUI, a redraw). Per
	 * instance: after /reload or /new the first footer is always set. */
	private footer: { ui: ExtensionContext["ui"]; text: string | undefined } | undefined;
	lastCtx: ExtensionContext | undefined;

	constructor(private readonly pi: ExtensionAPI) {}

	/** Why rewind is off for this session, or undefined while it runs (or can still restart):
	 * `/rewind` says which (rewind-command.ts). */
	get unavailable(): RewindOff | undefined {
		return this.off;
	}

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
		// After `pi install` no `rewind` is on PATH: say where it is and how to reach it.
		const bin = path.join(venv, "bin");
		const ready = [
			`Rewind: Python side ready in ${venv}; the \`rewind\` command is ${path.join(bin, "rewind")}`,
			`  to use it in a shell: export PATH="${bin}:$PATH"  (or: ln -s ${path.join(bin, "rewind")} ~/.local/bin/rewind)`,
		];
		if (ctx.hasUI) ctx.ui.setWidget(KEY, ready);
		else process.stderr.write(`${ready.join("\n")}\n`);
	}

	/** The next start first creates the package's venv (minutes, not milliseconds). */
	willSetUp(): boolean {
		try {
			return !this.link && !this.off && bridgePlan().setup !== undefined;
		} catch {
			return false;
		}
	}

	/** Open a bridge: the watcher's hosting if it accepts, else the bridge command. */
	private async open(ctx: ExtensionContext): Promise<Link> {
		const hosted = await connectHosted(ctx.cwd);
		if (hosted) {
			const link = this.attach(hosted.socket, hosted.rest);
			link.ahead = hosted.ahead;
			return link;
		}
		let plan: Plan;
		try {
			plan = bridgePlan();
			if (plan.setup) await this.setUp(plan.setup.root, plan.setup.venv, ctx);
		} catch (err) {
			const link = newLink(false, []);
			this.end(link, err instanceof Error ? err.message : String(err), "missing");
			return link;
		}
		const [cmd, ...args] = plan.argv;
		const link = newLink(false, plan.argv);
		let child: ChildProcessWithoutNullStreams;
		try {
			// No UI (print mode): the bridge starts its walk before it reads the first event
			// (ledger/bridge/print_mode.py); the variable goes no further than that bridge.
			const env = ctx.hasUI ? process.env : { ...process.env, REWIND_BRIDGE_NO_UI: "1" };
			child = spawn(cmd, args, { cwd: ctx.cwd, stdio: ["pipe", "pipe", "pipe"], env });
		} catch (err) {
			this.end(link, `cannot start ${cmd}: ${err instanceof Error ? err.message : String(err)}`, "missing");
			return link;
		}
		child.stdout.setEncoding("utf8");
		child.stdout.on("data", (chunk: string) => this.onData(link, chunk));
		child.stderr.setEncoding("utf8");
		child.stderr.on("data", (chunk: string) => this.onStderr(link, chunk)); // never block on a full pipe
		child.on("error", (err) => this.end(link, `cannot start ${cmd}: ${err.message}`, "missing"));
		// "close", not "exit": a result written just before exiting is still read first.
		const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
		child.on("close", (code, signal) => this.end(link, exitReason(code, signal), code === 127 ? "missing" : "crash"));
		child.stdin.on("error", () => {}); // EPIPE after a crash: reported through "close"
		link.transport = {
			write: (text) => {
				if (!child.stdin.destroyed) child.stdin.write(text);
			},
			end: () => child.stdin.end(),
			kill: () => {
				if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
			},
			exited,
		};
		return link;
	}

	/** Speak the protocol on a connection the watcher accepted to host this session. */
	private attach(socket: net.Socket, rest: string): Link {
		const link = newLink(true, []);
		link.transport = {
			write: (text) => {
				if (!socket.destroyed) socket.write(text);
			},
			end: () => socket.end(),
			kill: () => socket.destroy(),
			release: () => socket.unref(),
			exited: new Promise<void>((resolve) => socket.on("close", () => resolve())),
		};
		socket.on("data", (chunk: string) => this.onData(link, chunk));
		socket.on("error", () => {}); // reported through "close"
		socket.on("close", () => this.end(link, "the watcher hosting this session ended", "crash"));
		if (rest) this.onData(link, rest);
		return link;
	}

	private onStderr(link: Link, chunk: string): void {
		const lines = (link.stderrPartial + chunk).split(/\r?\n/);
		link.stderrPartial = (lines.pop() ?? "").slice(-4096);
		for (const line of lines) if (line.trim()) link.stderr.push(line);
		if (link.stderr.length > STDERR_LINES) link.stderr.splice(0, link.stderr.length - STDERR_LINES);
	}

	private tail(link: Link): string[] {
		const lines = link.stderrPartial.trim() ? [...link.stderr, link.stderrPartial] : link.stderr;
		return lines.slice(-3).map((line) => `  ${line.slice(0, 300)}`);
	}

	/** A bridge ended (exit, kill, closed connection, start failure): fail the event it was
	 * answering (that event counts the loss) or, between events, count it now. */
	private end(link: Link, reason: string, cause: Cause): void {
		if (link.gone) return;
		link.gone = reason;
		link.cause = cause;
		if (cause !== "missing" && link.answered === 0 && this.tail(link).some((l) => /No module named/.test(l))) link.cause = "missing";
		if (this.link === link) this.link = undefined;
		if (!this.failUnanswered(link) && link.transport) this.lost(link, undefined, []);
	}

	/** Fail every event written to `link` and not answered, oldest first (each then counts or
	 * names its loss); whether there was any. */
	private failUnanswered(link: Link): boolean {
		const unanswered = this.inflight.filter((w) => w.link === link);
		if (unanswered.length === 0) return false;
		this.inflight = this.inflight.filter((w) => w.link !== link);
		for (const waiting of unanswered) waiting.reject(new LinkGone(link, waiting.appended));
		return true;
	}

	/** Count a loss, name what it cost, and decide: restart at the next event (after the back-off)
	 * or give up. */
	private lost(link: Link, event: string | undefined, appended: string[], payload?: Params): void {
		if (this.closed || this.off) return;
		if (link.counted) {
			this.miss(event, appended, payload); // an event written behind the one that counted it
			return;
		}
		link.counted = true;
		if (this.link === link) this.link = undefined;
		link.transport?.kill();
		this.failUnanswered(link); // events written behind this one will get no answer either
		const now = Date.now();
		const ran = link.answered > 0;
		this.losses = [...this.losses.filter((t) => now - t < DEATH_WINDOW_MS), now];
		this.deaths = this.deaths.filter((t) => now - t < DEATH_WINDOW_MS);
		if (ran) {
			this.deaths.push(now);
			this.failedStarts = 0;
		} else this.failedStarts += 1;
		const last = { reason: link.gone ?? "bridge gone", cause: link.cause, stderr: this.tail(link), argv: link.argv };
		if (!this.loss || ran) {
			const when = event ? `during ${event}` : this.prompt ? "while the agent was working" : "between prompts";
			this.loss = { reason: last.reason, when, hosted: link.hosted, ran: ran || this.everRan, failed: ran ? 0 : 1, missing: this.loss?.missing ?? [], last };
		} else {
			this.loss.failed += 1;
			this.loss.last = last;
		}
		this.miss(event, appended, payload);
		if (this.failedStarts >= MAX_FAILED_STARTS || this.deaths.length >= MAX_DEATHS) this.stop(this.lastCtx, "off");
		else this.notBefore = now + BACKOFF_MS[Math.min(this.losses.length - 1, BACKOFF_MS.length - 1)];
	}

	/** Add what `event` (not answered by any bridge) would have recorded to the pending loss. */
	private miss(event: string | undefined, appended: string[], payload?: Params): void {
		const loss = this.loss;
		if (!loss) return;
		const items: string[] = [];
		if (this.prompt?.recording && !(event === "agent_end" && appended.includes(TURN_TYPE))) {
			const quoted = this.prompt.text ? ` "${this.prompt.text}"` : " in progress";
			// The new bridge adopts the prompt: its later turns are recorded (Engine.turn_end).
			items.push(`the rewind points of the prompt${quoted} taken before the bridge stopped (the files before it; its later turns are recorded)`);
		}
		if (event) {
			const what = MISSING[event] ?? `the result of ${event}`;
			if (what) items.push(event === "checkpoint_entry" && payload?.entryId ? `${what} of ${String(payload.entryId)}` : what);
		}
		for (const item of items) if (!loss.missing.includes(item)) loss.missing.push(item);
	}

	private missingText(loss: Loss): string {
		return loss.missing.length ? `missing: ${loss.missing.join("; ")}` : "nothing is missing";
	}

	/** Restarting stops: too many failures ("off") or Pi ends the session first ("shutdown").
	 * One warning with the real cause and the hint that fits it. */
	private stop(ctx: ExtensionContext | undefined, why: "off" | "shutdown"): void {
		const loss = this.loss;
		this.loss = undefined;
		if (why === "off") this.off = { kind: "gave-up", why: loss?.last.reason ?? "bridge unavailable" };
		if (!loss) return;
		const last = loss.last;
		let head: string;
		if (!loss.ran) head = `it could not be started (${plural(loss.failed, "attempt")}; ${last.reason})`;
		else if (this.deaths.length >= MAX_DEATHS)
			head = `it stopped ${this.deaths.length} times within ${DEATH_WINDOW_MS / 60000} minutes (last: ${last.reason}, ${loss.when})`;
		else {
			const who = loss.hosted ? "the watcher hosting this session ended" : `it stopped (${loss.reason})`;
			head = `${who} ${loss.when}` + (loss.failed ? ` and ${plural(loss.failed, "restart")} failed (last: ${last.reason})` : "");
		}
		const ending =
			why === "off" ? "rewind is off for the rest of this session" : `Pi ended the session before another ${loss.ran ? "restart" : "attempt"}`;
		const doctor = last.argv.includes("serve") ? [...last.argv.slice(0, last.argv.indexOf("serve")), "doctor"].join(" ") : "rewind doctor";
		let hint: string;
		if (last.cause === "missing" && !loss.ran) hint = INSTALL_HINT; // only when it never ran
		else if (last.cause === "timeout")
			hint = `hint: the bridge took longer than REWIND_BRIDGE_TIMEOUT_MS (${TIMEOUT_MS} ms) for one event; raise it for a very large repository, check it with \`${doctor}\`, then /reload`;
		else if (!loss.ran)
			hint = `hint: the bridge command (${last.argv.join(" ") || "REWIND_BRIDGE_CMD"}) exits as it starts; run it by hand to see why (REWIND_DEBUG=1 shows a traceback), check \`${doctor}\`, then /reload`;
		else
			hint = `hint: the bridge had been running; run Pi with REWIND_DEBUG=1 to get its traceback on stderr (quoted here), check the repository with \`${doctor}\`, then /reload to start rewind again`;
		const text = [`Rewind: bridge unavailable: ${head}; ${ending}; ${this.missingText(loss)}`,
			...(last.stderr.length ? ["bridge stderr (last lines):", ...last.stderr] : []), hint].join("\n");
		show(ctx, text, "warning");
		if (why === "off") {
			clearScreen(ctx);
			this.footer = undefined;
		}
	}

	/** The bridge that replaced a lost one answered: say what happened and that rewind runs. */
	private recovered(link: Link, ctx: ExtensionContext): void {
		const loss = this.loss;
		this.loss = undefined;
		if (!loss) return;
		const retries = loss.failed > (loss.ran ? 0 : 1) ? ` (after ${plural(loss.failed - (loss.ran ? 0 : 1), "failed attempt")})` : "";
		let text: string;
		if (!loss.ran) text = `Rewind: the bridge did not start at first (${loss.reason}); started again${retries} — rewind is running; ${this.missingText(loss)}`;
		else {
			const how = loss.hosted ? `the watcher hosting this session ended ${loss.when}` : `the bridge stopped (${loss.reason}) ${loss.when}`;
			const again = link.hosted ? "reconnected to the watcher" : loss.hosted ? "this session's own bridge took over" : "restarted";
			text = `Rewind: ${how}; ${again}${retries} — rewind is running again; ${this.missingText(loss)}`;
		}
		const stderr = loss.last.stderr;
		show(ctx, stderr.length ? [text, "bridge stderr (last lines):", ...stderr].join("\n") : text, "warning");
	}

	/** Another rewind extension records this session: start no bridge, say so once. */
	standAside(ctx: ExtensionContext, text: string): void {
		this.off = { kind: "aside", why: "another rewind extension records this session" };
		this.shown.add(text);
		show(ctx, text, "warning");
	}

	private write(link: Link, message: object): void {
		link.transport?.write(`${JSON.stringify(message)}\n`);
	}

	private onData(link: Link, chunk: string): void {
		if (link.gone) return; // a bridge already given up on
		link.buffer += chunk;
		let newline: number;
		while ((newline = link.buffer.indexOf("\n")) >= 0) {
			const line = link.buffer.slice(0, newline).replace(/\r$/, "");
			link.buffer = link.buffer.slice(newline + 1);
			if (line.trim()) void this.onMessage(link, line);
		}
	}

	private async onMessage(link: Link, line: string): Promise<void> {
		let message: FromBridge;
		try {
			message = JSON.parse(line) as FromBridge;
		} catch {
			return; // not protocol output
		}
		const waiting = this.inflight.find((w) => w.link === link); // the oldest of this link's
		if (message.type === "call") {
			if (!waiting) {
				this.write(link, { type: "reply", id: message.id, error: "no event in flight" });
				return;
			}
			// A menu waits for the user: that time does not count against the bridge's deadline.
			const interactive = message.method === "select";
			if (interactive) waiting.deadline.pause();
			try {
				const result = await this.answer(message.method, message.params ?? {}, waiting);
				this.write(link, { type: "reply", id: message.id, result });
			} catch (err) {
				this.write(link, { type: "reply", id: message.id, error: err instanceof Error ? err.message : String(err) });
			} finally {
				if (interactive && this.inflight.includes(waiting)) waiting.deadline.resume();
			}
			return;
		}
		if ((message.type === "result" || message.type === "error") && waiting && message.id === waiting.id) {
			this.inflight.splice(this.inflight.indexOf(waiting), 1);
			this.inflight.find((w) => w.link === link)?.deadline.resume(); // its time runs from now
			waiting.resolve(message);
		}
	}

	private async answer(method: string, params: Params, waiting: Waiting): Promise<unknown> {
		const ctx = waiting.ctx;
		const sm = ctx.sessionManager;
		if (method === "session") {
			const entries = sm.getEntries();
			const from = Number(params.from) || 0;
			waiting.link.mirrored = entries.length;
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
			waiting.appended.push(String(params.customType));
			// The session after the append: the bridge's next look at it needs no call.
			return { entryId: sm.getLeafId(), session: sessionFacts(sm, waiting.link) };
		}
		if (method === "select") {
			if (!ctx.hasUI) return { choice: null };
			const options = Array.isArray(params.options) ? params.options.map(String) : [];
			const choice = await ctx.ui.select(String(params.title ?? ""), options);
			return { choice: choice ?? null };
		}
		throw new Error(`unknown call ${method}`);
	}

	/** Forward one event. Events are written in order. To a bridge that takes it (the
	 * watcher's hosting says so in its hello answer: `ahead`), each is written once the one
	 * before it is written, not answered (issue 34, stop 50): the bridge reads and answers them
	 * in order anyway, and keeps an event that comes while it waits for a reply to its own call;
	 * so an event Pi does not wait for (`before_agent_start`, `message_end`, print mode's
	 * `session_start`) no longer holds the next one back until Node's event loop takes its
	 * answer in, which Pi's own work can delay by milliseconds. Elsewhere one at a time, as
	 * before. The result is what the bridge returned (`cancel`, `skipConversationRestore`, or a
	 * command's own fields), or undefined when it returned nothing or rewind is not running. */
	send(event: string, payload: Params, ctx: ExtensionContext | undefined): Promise<EventResult | undefined> {
		return this.enqueue(event, payload, ctx).answered;
	}

	/** Send `event` as {@link send} does; settles once it is on its way (written to the watcher
	 * that accepted this session, or to a bridge process just started), or found no bridge, not
	 * when it is answered. */
	sendOff(event: string, payload: Params, ctx: ExtensionContext): Promise<void> {
		return this.enqueue(event, payload, ctx).linked;
	}

	private enqueue(
		event: string,
		payload: Params,
		ctx: ExtensionContext | undefined,
	): { answered: Promise<EventResult | undefined>; linked: Promise<void> } {
		let onWritten: () => void = () => {};
		let onLinked: () => void = () => {};
		const written = new Promise<void>((resolve) => (onWritten = resolve));
		const linked = new Promise<void>((resolve) => (onLinked = resolve));
		const answered = this.queue.then(() => this.sendNow(event, payload, ctx, onWritten, onLinked));
		for (const settle of [onWritten, onLinked]) answered.then(settle, settle); // no bridge took it
		this.queue = written;
		return { answered, linked };
	}

	/** One event and its reply on `link`; rejects with LinkGone when the link ends first. */
	private exchange(link: Link, event: string, payload: Params, ctx: ExtensionContext): Promise<ResultMessage | ErrorMessage> {
		if (link.gone) return Promise.reject(new LinkGone(link, []));
		const id = this.nextId++;
		const sm = ctx.sessionManager;
		return new Promise<ResultMessage | ErrorMessage>((resolve, reject) => {
			const deadline = new Deadline(TIMEOUT_MS, () => {
				this.end(link, `no answer to ${event} within ${TIMEOUT_MS} ms`, "timeout");
				link.transport?.kill();
			});
			// Its time runs from when it is the oldest unanswered event of its link (see onMessage).
			if (this.inflight.some((w) => w.link === link)) deadline.pause();
			this.inflight.push({
				id,
				link,
				ctx,
				deadline,
				appended: [],
				resolve: (m) => {
					deadline.clear();
					if (m.type === "result" && Array.isArray(m.skip)) link.skip = new Set(m.skip.map(String));
					link.answered += 1;
					this.everRan = true;
					this.failedStarts = 0;
					resolve(m);
				},
				reject: (e) => (deadline.clear(), reject(e)),
			});
			this.write(link, {
				type: "event",
				id,
				event,
				payload,
				ctx: { hasUI: !!ctx.hasUI, cwd: ctx.cwd, sessionFile: sm.getSessionFile() ?? null, leafId: sm.getLeafId() ?? null },
				session: sessionFacts(sm, link),
			});
		});
	}

	private setFooter(ctx: ExtensionContext, text: string | undefined): void {
		if (this.footer?.ui === ctx.ui && this.footer.text === text) return;
		ctx.ui.setStatus(KEY, text);
		this.footer = { ui: ctx.ui, text };
	}

	/** Show a reply's notices, footer and panel; a replayed session_start repeats no warning. */
	private present(reply: ResultMessage | ErrorMessage, event: string, ctx: ExtensionContext, replay = false): EventResult | undefined {
		if (reply.type === "error") {
			show(ctx, `Rewind: ${reply.error?.message ?? "bridge error"} (${event})`, "warning");
			return undefined;
		}
		for (const notice of reply.notices ?? []) {
			if (replay && notice.level === "info") continue; // said when the session started
			const once = replay || notice.text.startsWith(OTHER_WRITER_PREFIX);
			if (notice.level !== "info" && once && this.shown.has(notice.text)) continue;
			if (notice.level !== "info" && this.shown.size < 100) this.shown.add(notice.text);
			if (ctx.hasUI) ctx.ui.notify(notice.text, notice.level);
			else if (notice.level !== "info") show(ctx, notice.text, notice.level);
		}
		if (ctx.hasUI) {
			if ("status" in reply) this.setFooter(ctx, reply.status ?? undefined);
			// The panel stays above the editor through Pi's redraw after /tree and /fork.
			if (reply.panel) ctx.ui.setWidget(KEY, reply.panel.length > 0 ? reply.panel : undefined);
		}
		const result = reply.result ?? {};
		return Object.keys(result).length > 0 ? result : undefined;
	}

	/** A bridge to send `event` to: the running one, or a new one (after a loss, when the
	 * back-off allows) that has been given this session's session_start first. */
	private async ready(event: string, ctx: ExtensionContext): Promise<Link | undefined> {
		if (this.link) return this.link;
		if (this.loss && event === "session_shutdown") {
			this.stop(ctx, "shutdown"); // no bridge is started only to end it
			return undefined;
		}
		if (Date.now() < this.notBefore) return undefined;
		const link = await this.open(ctx); // a first-run setup is not timed
		if (link.gone) {
			this.lost(link, undefined, []);
			return undefined;
		}
		this.link = link;
		if (this.startPayload && event !== "session_start") {
			try {
				this.present(await this.exchange(link, "session_start", this.startPayload, ctx), "session_start", ctx, true);
			} catch (err) {
				if (!(err instanceof LinkGone)) throw err;
				this.lost(link, undefined, []);
				return undefined;
			}
			this.recovered(link, ctx);
		}
		return this.link === link ? link : undefined;
	}

	private async sendNow(
		event: string,
		payload: Params,
		given: ExtensionContext | undefined,
		onWritten?: () => void,
		onLinked?: () => void,
	): Promise<EventResult | undefined> {
		if (given) this.lastCtx = given;
		const ctx = given ?? this.lastCtx;
		if (this.closed || !ctx || this.off) return undefined;
		if (event === "session_start") this.startPayload = payload;
		if (event === "before_agent_start") {
			const text = String(payload.prompt ?? "").replace(/\s+/g, " ").trim();
			this.prompt = { text: text.length > 40 ? `${text.slice(0, 40)}…` : text, recording: false };
		} else if (event === "turn_start" && payload.turnIndex === 0) this.prompt = { text: this.prompt?.text ?? "", recording: true };
		// An event the running bridge does nothing with is not sent (a dead one is restarted by
		// the next event that is).
		if (this.link?.skip.has(event)) return undefined;
		try {
			const link = await this.ready(event, ctx);
			if (!link) {
				this.miss(event, [], payload); // not forwarded: named when the loss is reported
				return undefined;
			}
			const fresh = link.answered === 0;
			const answered = this.exchange(link, event, payload, ctx); // written now
			onLinked?.();
			if (link.ahead) onWritten?.(); // else the next event waits for this one's answer
			const reply = await answered;
			if (fresh) this.recovered(link, ctx);
			return this.present(reply, event, ctx);
		} catch (err) {
			if (err instanceof LinkGone) this.lost(err.link, event, err.appended, payload);
			else show(ctx, `Rewind: ${err instanceof Error ? err.message : String(err)} (${event})`, "warning");
			return undefined;
		} finally {
			if (event === "agent_end") this.prompt = undefined;
		}
	}

	/** After session_shutdown: close stdin (the bridge exits on EOF), wait briefly, then kill. */
	async close(): Promise<void> {
		this.closed = true;
		const link = this.link;
		const transport = link?.transport;
		if (!link || !transport) return;
		transport.end();
		if (link.hosted && this.lastCtx?.hasUI === false && transport.release) {
			// Print mode on the watcher's hosting: every answer is in, session_shutdown's too,
			// and the watcher ends the session on its own once it reads our end of input; Pi's
			// exit does not wait for it to close its end (issue 34). Not with a UI: the next
			// session of this Pi (/new, /fork, /reload) must find this one gone from the watcher.
			transport.release();
			return;
		}
		let timer: ReturnType<typeof setTimeout> | undefined;
		const gone = await Promise.race([
			transport.exited.then(() => true),
			new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS))),
		]);
		clearTimeout(timer); // a pending timer would keep Pi's process alive
		if (!gone) transport.kill();
	}
}

/** Marks our own probe, so that our listeners skip it (an `in` test reads no getter). */
const PROBE = Symbol.for("rewind-ledger.probe");

/** True when another extension listens on the event-bus channels pi-rewind-hook listens on.
 * The bus calls listeners synchronously; the probe's fields are getters whose values no
 * listener's allow-list accepts (pi-rewind-hook reads `mode` / `source` first and returns). */
function otherRewindListener(pi: ExtensionAPI): boolean {
	let read = false;
	const probe = (field: string): object => {
		const value = { [PROBE]: true };
		Object.defineProperty(value, field, {
			enumerable: true,
			get: () => {
				read = true;
				return "rewind-ledger-probe";
			},
		});
		return value;
	};
	try {
		pi.events.emit("rewind:fork-preference", probe("mode"));
		pi.events.emit("rewind:checkpoint-entry", probe("source"));
	} catch {
		return false; // a listener threw: we cannot tell
	}
	return read;
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

/** The value of `rewind.<name>` in one settings file, or undefined (not set, or the file is
 * missing or unreadable: a setting of the extension is a convenience, never an error). */
function settingIn(file: string, name: string): unknown {
	try {
		if (fs.statSync(file).size > 1 << 20) return undefined; // a settings file, not a dump
		const rewind = JSON.parse(fs.readFileSync(file, "utf8"))?.rewind;
		return rewind && typeof rewind === "object" ? (rewind as Record<string, unknown>)[name] : undefined;
	} catch {
		return undefined;
	}
}

/** `rewind.<name>` from the project's `.pi/settings.json`, else the agent dir's `settings.json`
 * (the project wins, as in Pi's own settings); undefined when neither sets it. */
function rewindSetting(cwd: string, name: string): unknown {
	for (const file of [path.join(cwd, ".pi", "settings.json"), path.join(getAgentDir(), "settings.json")]) {
		const value = settingIn(file, name);
		if (value !== undefined) return value;
	}
	return undefined;
}

const DEFAULT_KEY = "alt+r";

/** The key that opens the list (docs/pi.md#rewind): `rewind.key` (a key name), else Alt+R;
 * `false` binds none. A value that is not a key name is ignored. */
function rewindKey(cwd: string): string | undefined {
	for (const file of [path.join(cwd, ".pi", "settings.json"), path.join(getAgentDir(), "settings.json")]) {
		const key = settingIn(file, "key"); // a value that is no key name: the next file decides
		if (key === false) return undefined;
		if (typeof key === "string" && /^[a-z0-9+]+$/i.test(key.trim())) return key.trim().toLowerCase();
	}
	return DEFAULT_KEY;
}

/** Register `/rewind` and its key (Alt+R unless `rewind.key` says otherwise). Their module,
 * rewind-command.ts (the overlay: ~800 lines), is loaded at their first use, not with every Pi
 * start (~1.5-2.5 ms of each, issue 34); a copy of this one file without it says so then. */
function registerRewind(pi: ExtensionAPI, bridge: Bridge): void {
	let loading: Promise<typeof import("./rewind-command.ts")> | undefined;
	const command = async (ctx: ExtensionContext) => {
		try {
			loading ??= import("./rewind-command.ts");
			return await loading;
		} catch (err) {
			loading = undefined;
			const why = err instanceof Error ? err.message : String(err);
			show(ctx, `Rewind: /rewind is not available (${why}); copy the whole tools/pi-extension folder to get it`, "warning");
			return undefined;
		}
	};
	pi.registerCommand("rewind", {
		description: "Rewind: see every rewind point of this branch, preview what a rewind would do, and do it",
		handler: async (args, ctx) => {
			await (await command(ctx))?.rewindCommand(args, bridge, ctx);
		},
	});
	const key = rewindKey(process.cwd());
	if (!key) return;
	pi.registerShortcut(key as Parameters<ExtensionAPI["registerShortcut"]>[0], {
		description: "Rewind: open the /rewind list",
		handler: async (ctx) => {
			await (await command(ctx))?.rewindKeyPressed(bridge, ctx);
		},
	});
}

export default async function rewindLedger(pi: ExtensionAPI): Promise<void> {
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
		// Every extension has loaded by now, in either order: another rewind extension is seen
		// before the first prompt, so that no prompt is recorded twice.
		if (otherRewindListener(pi)) {
			bridge.standAside(ctx, OTHER_WRITER);
			return;
		}
		const payload = { reason: e.reason, previousSessionFile: e.previousSessionFile ?? null };
		// A first-run setup of the Python side must not hold up Pi's start: not awaited then (the
		// events that follow wait for it in the bridge's queue).
		const setUp = bridge.willSetUp();
		if (ctx.hasUI) {
			const started = bridge.send("session_start", payload, ctx);
			if (!setUp) await started;
			return;
		}
		// Print mode (issue 34): the answer is not awaited (the first pi -p of the day: the
		// bridge's start, ~50 ms, is off the prompt's path). Pi uses nothing of it, its notices
		// still reach stderr before Pi ends (shutdown waits for the queue), and no tool of the
		// prompt runs before the pre-prompt snapshot (see tool_call below), which the bridge
		// takes after this event. Only the connection is: to the watcher, a connect and a hello
		// (~1.5 ms here, where Node's event loop is free); not awaited, it completed only at
		// turn_start, after Pi's own start of the prompt (~3.5 ms of work that never yields),
		// and the watcher began this session_start only then. Now it answers while Pi works.
		const onItsWay = bridge.sendOff("session_start", payload, ctx);
		if (!setUp) await onItsWay;
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
	pi.on("before_agent_start", (e, ctx) => {
		promptOpen = new Promise((resolve) => (closePrompt = resolve));
		// Sent, not awaited (issue 34): Pi awaits this handler before it calls the model, and the
		// engine adds nothing to the prompt, so the model's request starts now, while the bridge
		// may still be loading (a first bridge) and takes the pre-prompt snapshot. Nothing of
		// the prompt can touch a file before that: Pi persists the prompt's messages, and holds
		// every tool call, until our queued turn_start handler (the snapshot) is done, and the
		// bridge reads turn_start after this event (its queue), which waits for a restore in
		// progress (the gate). The leaf that turn_start sends is read then: still the one before
		// the prompt, since Pi appends the user message only after turn_start's handlers.
		void bridge.send("before_agent_start", { prompt: e.prompt }, ctx);
		return undefined; // the engine adds nothing to the prompt
	});
	pi.on("turn_start", async (e, ctx) => {
		await bridge.send("turn_start", { turnIndex: e.turnIndex }, ctx);
	});
	pi.on("message_end", (e, ctx) => {
		// Sent, not awaited: the bridge does nothing at message_end that Pi must wait for (the
		// entry is written after it; turn_end binds it), and the queue keeps it before the
		// turn_end that follows. Six of a prompt's fourteen round trips (issue 34, per prompt).
		void bridge.send("message_end", { role: e.message?.role ?? null }, ctx);
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
	// Our own probe (otherRewindListener) is skipped before any of its fields is read.
	const data = (value: unknown) => (value !== null && typeof value === "object" && PROBE in value ? undefined : ((value ?? {}) as Params));
	unsubscribe.push(
		pi.events.on("rewind:checkpoint-entry", (value) => {
			const d = data(value);
			if (!d) return;
			void bridge.send("checkpoint_entry", { entryId: d.entryId, source: d.source ?? null }, undefined);
		}),
		pi.events.on("rewind:fork-preference", (value) => {
			const d = data(value);
			if (!d) return;
			void bridge.send("fork_preference", { mode: d.mode, source: d.source }, undefined);
		}),
	);
	registerRewind(pi, bridge); // `/rewind` and its key: their module loads at their first use
	// The model's own `rewind` tool (tools/pi-extension/rewind-tool.ts, issue 36): registered
	// now, so that the model is told of it from the first request. Loaded here, not imported at
	// the top: a copy of this one file into ~/.pi/agent/extensions/ still runs, without the
	// tool and /rewind, and says so.
	try {
		const { registerRewindTool } = await import("./rewind-tool.ts");
		registerRewindTool(pi, bridge, rewindSetting);
	} catch (err) {
		const why = err instanceof Error ? err.message : String(err);
		pi.on("session_start", (_e, ctx) => {
			show(ctx, `Rewind: the rewind tool and /rewind are not available (${why}); copy the whole tools/pi-extension folder to get them`, "info");
		});
	}
}
