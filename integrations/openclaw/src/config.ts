/**
 * The plugin's settings (`plugins.entries.brain.config`), with their defaults.
 * The manifest's configSchema validates them first; this only fills gaps.
 */
import { homedir } from "node:os";
import { join, resolve } from "node:path";

/** Resolved plugin settings. */
export interface BrainPluginConfig {
  command: string;
  commandArgs: string[];
  db: string;
  deadlineMs: number;
  compactDeadlineMs: number;
  toolDeadlineMs: number;
  defaultBudget: number;
  stubs: boolean;
  detail: boolean;
  recall: "off" | "shadow" | "on" | undefined;
  subagentTokenCap: number;
  maintainEveryMs: number;
  disposeCompactionMs: number;
}

function num(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) ? value : fallback;
}

function expand(path: string): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return resolve(path);
}

/** Settings from the raw plugin config (`api.pluginConfig`). */
export function resolveConfig(raw: Record<string, unknown> | undefined): BrainPluginConfig {
  const c = raw ?? {};
  const recall = c.recall;
  return {
    command: typeof c.command === "string" && c.command ? c.command : "brain",
    commandArgs: Array.isArray(c.commandArgs) ? c.commandArgs.map(String) : [],
    db: expand(typeof c.db === "string" && c.db ? c.db : "~/.openclaw/brain/brain.db"),
    deadlineMs: num(c.deadlineMs, 15_000),
    compactDeadlineMs: num(c.compactDeadlineMs, 120_000),
    toolDeadlineMs: num(c.toolDeadlineMs, 30_000),
    defaultBudget: num(c.defaultBudget, 32_000),
    stubs: typeof c.stubs === "boolean" ? c.stubs : true,
    // Off by default: OpenClaw recovers from an overflow by asking the engine to
    // compact and assembling again; a context that opens summaries to refill its
    // budget on every assemble would undo that compaction.
    detail: typeof c.detail === "boolean" ? c.detail : false,
    recall: recall === "off" || recall === "shadow" || recall === "on" ? recall : undefined,
    subagentTokenCap: num(c.subagentTokenCap, 200_000),
    maintainEveryMs: num(c.maintainEveryMs, 6 * 3_600_000),
    disposeCompactionMs: num(c.disposeCompactionMs, 15_000),
  };
}
