/**
 * The child `brain serve --db PATH` and the NDJSON calls to it.
 *
 * One child per database, shared by every engine instance and tool of the
 * plugin (reference-counted: the last release sends `shutdown`). A child that
 * dies is started again on the next call, and a call marked idempotent that
 * was in flight when it died is sent once more to the new child. Every call
 * has a deadline: the host's turn never waits on brain longer than that.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";

/** What the plugin logs through (OpenClaw's `api.logger`). */
export interface Logger {
  debug?: (message: string) => void;
  info: (message: string) => void;
  warn: (message: string) => void;
  error: (message: string) => void;
}

/** How to start the daemon. */
export interface SpawnOptions {
  command: string;
  args: string[];
  db: string;
  env?: NodeJS.ProcessEnv;
}

/** Options of one call. */
export interface CallOptions {
  /** Give up (reject with BrainTimeout) after this many milliseconds. */
  deadlineMs: number;
  /** Safe to send again after the child died mid-call (reads, ingests with ids). */
  idempotent?: boolean;
  /** Run the request within this brain grant. */
  grant?: string;
  /** Stop waiting when this aborts (the request may still finish in brain). */
  signal?: AbortSignal;
}

/** brain answered with an error object; `code` is brain's stable error code. */
export class BrainError extends Error {
  readonly code: number;
  readonly data: unknown;
  constructor(method: string, code: number, message: string, data: unknown) {
    super(`brain ${method}: ${message} (${code})`);
    this.name = "BrainError";
    this.code = code;
    this.data = data;
  }
}

/** The call's deadline passed before brain answered. */
export class BrainTimeout extends Error {
  constructor(method: string, deadlineMs: number) {
    super(`brain ${method}: no answer within ${deadlineMs} ms`);
    this.name = "BrainTimeout";
  }
}

/** The daemon could not be started or died; `notInstalled` when the command is missing. */
export class BrainUnavailable extends Error {
  readonly notInstalled: boolean;
  constructor(message: string, notInstalled = false) {
    super(message);
    this.name = "BrainUnavailable";
    this.notInstalled = notInstalled;
  }
}

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

interface Child {
  proc: ChildProcessWithoutNullStreams;
  pending: Map<number, Pending>;
  exited: boolean;
  stderrTail: string[];
}

// A child that keeps dying is not restarted in a tight loop: after this many
// starts within the window, calls fail fast until the window has passed.
const MAX_STARTS = 5;
const START_WINDOW_MS = 60_000;

/** A reference-counted connection to one `brain serve` child. */
export class BrainClient {
  readonly options: SpawnOptions;
  private readonly log: Logger;
  private child: Child | null = null;
  private nextId = 1;
  private refs = 0;
  private starts: number[] = [];
  private reportedMissing = false;
  private lastStartError: BrainUnavailable | null = null;

  constructor(options: SpawnOptions, log: Logger) {
    this.options = options;
    this.log = log;
  }

  /** Take a reference (an engine instance, a tool call) on the shared child. */
  acquire(): void {
    this.refs += 1;
  }

  /** Drop a reference; the last one shuts the daemon down cleanly. */
  async release(deadlineMs = 5_000): Promise<void> {
    this.refs = Math.max(0, this.refs - 1);
    if (this.refs === 0) await this.shutdown(deadlineMs);
  }

  /** The daemon's process id while one runs (for tests and logs). */
  get pid(): number | undefined {
    return this.child && !this.child.exited ? this.child.proc.pid : undefined;
  }

  /** Send `shutdown` and wait for the child to exit (killed past the deadline). */
  async shutdown(deadlineMs = 5_000): Promise<void> {
    const child = this.child;
    if (!child || child.exited) return;
    const exited = new Promise<void>((resolve) => child.proc.once("exit", () => resolve()));
    try {
      await this.send(child, "shutdown", {}, { deadlineMs });
    } catch {
      // Whatever went wrong, the child must not outlive its last user.
    }
    const timer = setTimeout(() => child.proc.kill("SIGKILL"), deadlineMs);
    await exited;
    clearTimeout(timer);
  }

  /** Call `method` with `params`; resolves with brain's `result`. */
  async call<T = Record<string, unknown>>(
    method: string,
    params: Record<string, unknown>,
    options: CallOptions,
  ): Promise<T> {
    const started = Date.now();
    let attempt = 0;
    for (;;) {
      attempt += 1;
      const left = options.deadlineMs - (Date.now() - started);
      if (left <= 0) throw new BrainTimeout(method, options.deadlineMs);
      const child = this.ensureChild();
      try {
        return (await this.send(child, method, params, { ...options, deadlineMs: left })) as T;
      } catch (error) {
        // Only a death of the child is worth a second try, and only for a
        // call that does the same thing when applied twice.
        const died = error instanceof BrainUnavailable && !error.notInstalled;
        if (!(died && options.idempotent && attempt < 2)) throw error;
        this.log.warn(`brain: the daemon died during ${method}; restarting it and retrying`);
      }
    }
  }

  private ensureChild(): Child {
    if (this.child && !this.child.exited) return this.child;
    const now = Date.now();
    this.starts = this.starts.filter((t) => now - t < START_WINDOW_MS);
    if (this.starts.length >= MAX_STARTS) {
      // A missing command stays the reason given, not "it keeps exiting".
      if (this.lastStartError?.notInstalled) throw this.lastStartError;
      throw new BrainUnavailable(
        `brain: the daemon exited ${MAX_STARTS} times within a minute; not restarting it yet (see the errors above)`,
      );
    }
    this.starts.push(now);
    this.child = this.start();
    return this.child;
  }

  private start(): Child {
    const { command, args, db, env } = this.options;
    const proc = spawn(command, [...args, "serve", "--db", db], {
      stdio: ["pipe", "pipe", "pipe"],
      env: env ?? process.env,
    });
    const child: Child = { proc, pending: new Map(), exited: false, stderrTail: [] };
    this.idle(child);
    proc.on("error", (error: NodeJS.ErrnoException) => {
      const missing = error.code === "ENOENT";
      const message = missing
        ? `brain is not installed: the command \`${command}\` was not found. Install brain ` +
          "(`pip install brain-memory`, or a checkout's .venv/bin/brain) and put it on PATH, " +
          'or set plugins.entries.brain.config.command to its path (and "commandArgs" if it needs any).'
        : `brain: could not start \`${command}\`: ${error.message}`;
      if (!missing || !this.reportedMissing) this.log.error(message);
      if (missing) this.reportedMissing = true;
      this.lastStartError = new BrainUnavailable(message, missing);
      this.fail(child, this.lastStartError);
    });
    proc.on("exit", (code, signal) => {
      if (child.exited) return;
      const tail = child.stderrTail.join("\n");
      const how = signal ? `signal ${signal}` : `code ${code}`;
      const message = `brain: the daemon (pid ${proc.pid}) exited with ${how}${tail ? `: ${tail}` : ""}`;
      if (child.pending.size > 0 || code !== 0) this.log.warn(message);
      this.fail(child, new BrainUnavailable(message));
    });
    // A write after the child died reports EPIPE here; the exit handler fails the calls.
    proc.stdin.on("error", () => undefined);
    createInterface({ input: proc.stdout }).on("line", (line) => this.answer(child, line));
    createInterface({ input: proc.stderr }).on("line", (line) => {
      child.stderrTail.push(line);
      if (child.stderrTail.length > 5) child.stderrTail.shift();
      this.log.debug?.(`brain: ${line}`);
    });
    return child;
  }

  private send(
    child: Child,
    method: string,
    params: Record<string, unknown>,
    options: CallOptions,
  ): Promise<unknown> {
    if (options.signal?.aborted) return Promise.reject(abortError(options.signal));
    const id = this.nextId++;
    const request: Record<string, unknown> = { id, method, params };
    if (options.grant) request.grant = options.grant;
    return new Promise<unknown>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        child.pending.delete(id);
        this.idle(child);
      };
      const timer = setTimeout(() => {
        done();
        reject(new BrainTimeout(method, options.deadlineMs));
      }, options.deadlineMs);
      const onAbort = (): void => {
        done();
        reject(abortError(options.signal));
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      child.pending.set(id, {
        method,
        resolve: (value) => {
          done();
          resolve(value);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      this.busy(child);
      child.proc.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }

  private answer(child: Child, line: string): void {
    let message: {
      id?: unknown;
      result?: unknown;
      error?: { code: number; message: string; data?: unknown };
    };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      this.log.warn(`brain: not a protocol line: ${line.slice(0, 200)}`);
      return;
    }
    if (typeof message.id !== "number") return; // progress notifications
    const pending = child.pending.get(message.id);
    if (!pending) return; // an answer after its deadline
    if (message.error) {
      const { code, message: text, data } = message.error;
      pending.reject(new BrainError(pending.method, code, text, data));
    } else {
      pending.resolve(message.result);
    }
  }

  private fail(child: Child, error: Error): void {
    child.exited = true;
    for (const pending of [...child.pending.values()]) pending.reject(error);
    child.pending.clear();
  }

  // The child and its pipes keep Node alive only while a call waits on them,
  // so a one-shot `openclaw agent --local` exits when its work is done even
  // if no one disposed the engine (brain then sees EOF and stops itself).
  private busy(child: Child): void {
    child.proc.ref();
    for (const stream of [child.proc.stdout, child.proc.stderr, child.proc.stdin]) {
      (stream as unknown as { ref?: () => void }).ref?.();
    }
  }

  private idle(child: Child): void {
    if (child.pending.size > 0) return;
    child.proc.unref();
    for (const stream of [child.proc.stdout, child.proc.stderr, child.proc.stdin]) {
      (stream as unknown as { unref?: () => void }).unref?.();
    }
  }
}

function abortError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error("aborted");
}
