/** A fake OpenClaw plugin `api` over the real plugin code, and a real brain to run it on. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { ContextEngine, HistoryReader } from "../dist/engine.js";
import { registerBrain } from "../dist/plugin.js";

/** The brain executable: $BRAIN_COMMAND, or `brain` on PATH (scripts/test puts .venv/bin there). */
export function brainCommand(): string | undefined {
  const command = process.env.BRAIN_COMMAND ?? "brain";
  try {
    execFileSync(command, ["--version"], { stdio: "ignore" });
    return command;
  } catch {
    return undefined;
  }
}

/**
 * Why a test that needs a real brain is skipped (false: it runs). A
 * BRAIN_COMMAND that does not run is an error, not a skip: scripts/test sets
 * it, so CI never passes by skipping.
 */
export const needsBrain: string | false = brainCommand()
  ? false
  : "no brain command (set BRAIN_COMMAND or put brain on PATH)";
if (needsBrain && process.env.BRAIN_COMMAND) {
  throw new Error(`BRAIN_COMMAND=${process.env.BRAIN_COMMAND} does not run (\`--version\` failed)`);
}

export interface Logged {
  level: string;
  message: string;
}

type Factory = (ctx: Record<string, unknown>) => ContextEngine | Promise<ContextEngine>;
type ToolFactory = (ctx: Record<string, unknown>) => unknown;

/** What the plugin registered on the fake api, and what it logged. */
export interface Harness {
  dir: string;
  db: string;
  logs: Logged[];
  engines: Map<string, Factory>;
  tools: Map<string, ToolFactory>;
  plugin: ReturnType<typeof registerBrain>;
  engine(): Promise<ContextEngine>;
  tool(name: string, ctx: Record<string, unknown>): {
    execute: (id: string, params: unknown, signal?: AbortSignal) => Promise<{ details: unknown }>;
  };
  close(): Promise<void>;
}

/**
 * Register the plugin on a fake api with `config` (db in a fresh temp dir by
 * default); `hostConfig`, when given, is OpenClaw's whole config (`api.config`).
 */
export function harness(
  config: Record<string, unknown> = {},
  readHistory?: HistoryReader,
  hostConfig?: Record<string, unknown>,
): Harness {
  const dir = mkdtempSync(join(tmpdir(), "brain-oc-"));
  const db = join(dir, "brain.db");
  const logs: Logged[] = [];
  const engines = new Map<string, Factory>();
  const tools = new Map<string, ToolFactory>();
  const made: ContextEngine[] = [];
  const logger = {
    debug: (message: string) => logs.push({ level: "debug", message }),
    info: (message: string) => logs.push({ level: "info", message }),
    warn: (message: string) => logs.push({ level: "warn", message }),
    error: (message: string) => logs.push({ level: "error", message }),
  };
  const api = {
    pluginConfig: { command: brainCommand() ?? "brain", db, ...config },
    logger,
    ...(hostConfig ? { config: hostConfig } : {}),
    registerContextEngine: (id: string, factory: Factory) => engines.set(id, factory),
    registerTool: (factory: ToolFactory, opts?: { name?: string }) =>
      tools.set(opts?.name ?? "?", factory),
  };
  const plugin = registerBrain(
    api as unknown as Parameters<typeof registerBrain>[0],
    readHistory ? { readHistory } : {},
  );
  return {
    dir,
    db,
    logs,
    engines,
    tools,
    plugin,
    async engine() {
      const factory = engines.get("brain");
      if (!factory) throw new Error("no engine registered");
      const engine = await factory({});
      made.push(engine);
      return engine;
    },
    tool(name, ctx) {
      const factory = tools.get(name);
      if (!factory) throw new Error(`no tool ${name}`);
      return factory(ctx) as ReturnType<Harness["tool"]>;
    },
    async close() {
      for (const engine of made) await engine.dispose?.();
      await plugin.client.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A user message as OpenClaw records it. */
export function user(text: string, timestamp: number): Record<string, unknown> {
  return { role: "user", content: text, timestamp };
}

/** An assistant message as OpenClaw records it. */
export function assistant(content: unknown[], timestamp: number): Record<string, unknown> {
  return {
    role: "assistant",
    content,
    api: "openai-completions",
    provider: "fake",
    model: "fake-model",
    usage: {
      input: 10,
      output: 5,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 15,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason: content.some((b) => (b as { type: string }).type === "toolCall") ? "toolUse" : "stop",
    timestamp,
  };
}
