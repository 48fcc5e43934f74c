#!/usr/bin/env node
// The per-turn overhead the plugin adds to an OpenClaw turn: the assemble
// and commitTurn round trips to a real `brain serve` child, over a session
// that grows turn by turn (each turn: a user message, a tool call, its
// result, an answer). Prints one JSON line.
//
//   PATH="$(scripts/node.sh):$PATH" npm run build
//   node scripts/bench.mjs [--turns 200] [--budget 12000] [--brain PATH]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import { registerBrain } from "../dist/plugin.js";

const { values } = parseArgs({
  options: {
    turns: { type: "string", default: "200" },
    budget: { type: "string", default: "12000" },
    brain: { type: "string", default: process.env.BRAIN_COMMAND ?? "brain" },
  },
});
const turns = Number(values.turns);
const budget = Number(values.budget);
const dir = mkdtempSync(join(tmpdir(), "brain-oc-bench-"));
let factory;
registerBrain(
  {
    pluginConfig: { command: values.brain, db: join(dir, "brain.db"), maintainEveryMs: 0 },
    logger: { info() {}, warn: console.error, error: console.error },
    registerContextEngine: (_id, f) => (factory = f),
    registerTool() {},
  },
  {},
);
const engine = await factory({});
const usage = { input: 900, output: 60, cacheRead: 0, cacheWrite: 0, totalTokens: 960, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const model = { api: "openai-completions", provider: "fake", model: "fake-model", usage };
function turn(n, t) {
  return [
    { role: "user", content: `Turn ${n}: what did we decide about component ${n % 17} and the ${n % 5} open issues?`, timestamp: t },
    { role: "assistant", content: [{ type: "toolCall", id: `c${n}`, name: "read", arguments: { path: `notes/${n}.md` } }], ...model, stopReason: "toolUse", timestamp: t + 1 },
    { role: "toolResult", toolCallId: `c${n}`, toolName: "read", content: [{ type: "text", text: `notes ${n}: `.padEnd(1200, "lorem ipsum ") }], isError: false, timestamp: t + 2 },
    { role: "assistant", content: [{ type: "text", text: `For component ${n % 17} we kept the plan; ${n % 5} issues remain.` }], ...model, stopReason: "stop", timestamp: t + 3 },
  ];
}
const assembleMs = [];
const commitMs = [];
const t0 = Date.now();
let first;
for (let n = 0; n < turns; n++) {
  let start = performance.now();
  const context = await engine.assemble({ sessionId: "bench", messages: [], tokenBudget: budget });
  const took = performance.now() - start;
  if (n === 0) first = took; // includes starting the child
  else assembleMs.push(took);
  start = performance.now();
  const r = await engine.commitTurn({ advancementKey: `k${n}`, messages: turn(n, t0 + n * 10), sessionId: "bench", sessionKey: "agent:main:bench" });
  commitMs.push(performance.now() - start);
  if (r.status !== "committed") throw new Error(`turn ${n}: ${r.status}`);
  if (n === turns - 1) globalThis.lastTokens = context.estimatedTokens;
}
const retry = await engine.commitTurn({ advancementKey: `k${turns - 1}`, messages: turn(turns - 1, t0 + (turns - 1) * 10), sessionId: "bench" });
await engine.dispose();
rmSync(dir, { recursive: true, force: true });
const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor(p * s.length))] * 10) / 10;
};
console.log(JSON.stringify({
  bench: "openclaw_turn_overhead",
  turns,
  budget,
  first_assemble_with_spawn_ms: Math.round(first),
  assemble_ms: { p50: q(assembleMs, 0.5), p95: q(assembleMs, 0.95), max: q(assembleMs, 1) },
  commit_turn_ms: { p50: q(commitMs, 0.5), p95: q(commitMs, 0.95), max: q(commitMs, 1) },
  last_assembled_tokens: globalThis.lastTokens,
  retry_status: retry.status,
}));
