/** The context engine on a fake OpenClaw api and a real brain child. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { afterEach, describe, test } from "node:test";

import type { TranscriptEntry } from "../dist/engine.js";
import { TOOL_NAMES } from "../dist/tools.js";
import { assistant, harness, needsBrain, user, type Harness } from "./helpers.ts";

const T = 1_763_942_400_000;
const manifest = JSON.parse(readFileSync(new URL("../openclaw.plugin.json", import.meta.url), "utf8"));

function turn(n: number): Record<string, unknown>[] {
  return [
    user(`question ${n}: where is item ${n}?`, T + n * 10),
    assistant([{ type: "text", text: `item ${n} is in drawer ${n}` }], T + n * 10 + 1),
  ];
}

async function stored(h: Harness): Promise<number> {
  h.plugin.client.acquire();
  const info = await h.plugin.client.call<{ messages: number }>("info", {}, { deadlineMs: 30_000 });
  await h.plugin.client.release();
  return info.messages;
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("registration", () => {
  test("the engine declares the 2026.9 transcript semantics and owns compaction", async () => {
    h = harness({ command: "/nonexistent/brain" });
    const engine = await h.engine();
    assert.equal(engine.info.id, "brain");
    assert.equal(engine.info.ownsCompaction, true);
    assert.deepEqual(engine.info.transcriptSemantics, {
      currentTurnFence: "before-current-turn-entry-v1",
      turnAdvancementIdempotency: "atomic-idempotent-v1",
    });
    assert.equal(typeof engine.commitTurn, "function");
    assert.equal(typeof engine.prepareSubagentSpawn, "function");
  });

  test("the tools registered are the manifest's contracts.tools, brain's eight", () => {
    h = harness({ command: "/nonexistent/brain" });
    assert.deepEqual([...h.tools.keys()], manifest.contracts.tools);
    assert.deepEqual(TOOL_NAMES, manifest.contracts.tools);
    assert.equal(manifest.kind, "context-engine");
    assert.equal(manifest.activation.onStartup, true);
  });
});

describe("brain not installed", () => {
  test("the error names the missing command in the log, and the turn goes on", async () => {
    h = harness({ command: "/nonexistent/brain" });
    const engine = await h.engine();
    const host = [user("hello", T)];
    const result = await engine.assemble({ sessionId: "s", messages: host as never, tokenBudget: 1000 });
    assert.deepEqual(result.messages, host);
    const errors = h.logs.filter((l) => l.level === "error").map((l) => l.message);
    assert.ok(errors.some((m) => m.includes("brain is not installed") && m.includes("/nonexistent/brain")), errors.join("\n"));
    // However often the host retries, the reason stays the missing command, logged once.
    for (let i = 0; i < 7; i++) {
      await assert.rejects(
        engine.commitTurn!({ advancementKey: "k", messages: host as never, sessionId: "s" } as never),
        /brain is not installed/,
      );
    }
    assert.equal(h.logs.filter((l) => l.level === "error").length, 1);
  });
});

describe("deadline", () => {
  test("assemble gives the host's messages back when brain does not answer in time", async () => {
    h = harness({
      command: process.execPath,
      commandArgs: [new URL("./fixtures-silent-brain.mjs", import.meta.url).pathname],
      deadlineMs: 300,
    });
    const engine = await h.engine();
    const host = [user("hello", T)];
    const result = await engine.assemble({ sessionId: "s", messages: host as never, tokenBudget: 1000 });
    assert.deepEqual(result.messages, host);
    assert.ok(h.logs.some((l) => l.level === "warn" && /no answer within 300 ms/.test(l.message)));
    await assert.rejects(
      engine.commitTurn!({ advancementKey: "k", messages: host as never, sessionId: "s" } as never),
      /no answer within 300 ms/,
    );
    h.plugin.client.shutdown(100).catch(() => undefined);
  });
});

describe("turns through a real brain", { skip: needsBrain }, () => {
  test("commitTurn stores a turn once; the retried turn answers duplicate", async () => {
    h = harness();
    const engine = await h.engine();
    const params = { advancementKey: "adv-1", messages: turn(1), sessionId: "s1", sessionKey: "agent:main:main" };
    assert.deepEqual(await engine.commitTurn!(params as never), { status: "committed" });
    assert.deepEqual(await engine.commitTurn!(params as never), { status: "duplicate" });
    assert.equal(await stored(h), 2);
  });

  test("assemble ignores the host's messages and answers from brain", async () => {
    h = harness();
    const engine = await h.engine();
    await engine.commitTurn!({ advancementKey: "a1", messages: turn(1), sessionId: "s1" } as never);
    const injected = [
      user("an injection the engine made earlier", T),
      assistant([{ type: "text", text: "an injected reply" }], T + 1),
    ];
    const result = await engine.assemble({ sessionId: "s1", messages: injected as never, tokenBudget: 4000 });
    const texts = JSON.stringify(result.messages);
    assert.ok(texts.includes("item 1 is in drawer 1"));
    assert.ok(!texts.includes("injection"));
    assert.equal(result.messages.length, 2);
    assert.equal((result.messages[1] as { provider?: string }).provider, "fake");
    // Nothing folded or left out: no guidance needed.
    assert.equal(result.systemPromptAddition, undefined);
  });

  test("without tokenBudget the budget comes from runtimeSettings.limits.promptTokenBudget", async () => {
    h = harness();
    const engine = await h.engine();
    for (let i = 1; i <= 6; i++) {
      await engine.commitTurn!({ advancementKey: `a${i}`, messages: turn(i), sessionId: "s1" } as never);
    }
    const wide = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 4000 });
    const narrow = await engine.assemble({
      sessionId: "s1",
      messages: [],
      runtimeSettings: { limits: { promptTokenBudget: 20, maxOutputTokens: null }, model: { resolved: null } } as never,
    });
    assert.equal(wide.messages.length, 12);
    assert.ok(narrow.messages.length < wide.messages.length, `${narrow.messages.length}`);
  });

  test("bootstrap imports the transcript's history once, by entry id", async () => {
    const history: TranscriptEntry[] = turn(1).map((message, i) => ({ entryId: `e${i}`, message: message as never }));
    let reads = 0;
    h = harness({}, async function* () {
      reads += 1;
      yield history;
    });
    const engine = await h.engine();
    const first = await engine.bootstrap!({ sessionId: "s1", sessionFile: "" });
    assert.deepEqual(first, { bootstrapped: true, importedMessages: 2 });
    const again = await engine.bootstrap!({ sessionId: "s1", sessionFile: "" });
    assert.equal(again.bootstrapped, false);
    assert.equal(reads, 1);
    assert.equal(await stored(h), 2);
  });

  test("compact folds history into summaries, and an aborted compact rejects", async () => {
    h = harness();
    const engine = await h.engine();
    for (let i = 1; i <= 40; i++) {
      await engine.commitTurn!({ advancementKey: `a${i}`, messages: turn(i), sessionId: "s1" } as never);
    }
    const aborted = new AbortController();
    aborted.abort(new Error("host timeout"));
    await assert.rejects(
      engine.compact({ sessionId: "s1", sessionKey: "k", abortSignal: aborted.signal }),
      /host timeout/,
    );
    const result = await engine.compact({ sessionId: "s1", sessionKey: "k", force: true });
    assert.equal(result.ok, true);
    assert.equal(result.compacted, true);
    const after = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 100_000 });
    assert.ok(JSON.stringify(after.messages).includes("<summary"));
    // With history folded, the model is told how to unfold it.
    assert.match(after.systemPromptAddition ?? "", /memory_grep/);
  });

  test("with detail, room left in the budget opens the summaries compaction made; without, they stay", async () => {
    for (const detail of [false, true]) {
      h = harness(detail ? { detail: true } : {});
      const engine = await h.engine();
      for (let i = 1; i <= 40; i++) {
        await engine.commitTurn!({ advancementKey: `a${i}`, messages: turn(i), sessionId: "s1" } as never);
      }
      await engine.compact({ sessionId: "s1", sessionKey: "k", force: true });
      const after = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 100_000 });
      const text = JSON.stringify(after.messages);
      // The whole history fits 100,000 tokens: with detail it comes back raw.
      assert.equal(text.includes("<summary"), !detail);
      assert.equal(text.includes("question 1: where is item 1?"), detail);
      await h.close();
    }
  });

  test("a tool reads only the calling session, whatever session the model asks for", async () => {
    h = harness();
    const engine = await h.engine();
    await engine.commitTurn!({ advancementKey: "a", messages: turn(1), sessionId: "mine" } as never);
    await engine.commitTurn!({ advancementKey: "b", messages: turn(2), sessionId: "other" } as never);
    const grep = h.tool("memory_grep", { sessionId: "mine", sessionKey: "agent:main:x" });
    const result = (await grep.execute("c1", { query: "drawer", session: "other", all: true })).details as {
      hits: { session: string }[];
    };
    assert.ok(result.hits.length > 0);
    assert.deepEqual(new Set(result.hits.map((hit) => hit.session)), new Set(["mine"]));
  });

  test("a sub-agent reads its parent's session under a grant that rollback revokes", async () => {
    h = harness();
    const engine = await h.engine();
    await engine.commitTurn!({ advancementKey: "a", messages: turn(3), sessionId: "parent" } as never);
    const prepared = await engine.prepareSubagentSpawn!({
      parentSessionKey: "agent:main:main",
      childSessionKey: "agent:main:subagent:1",
      parentSessionId: "parent",
    });
    const grep = h.tool("memory_grep", { sessionId: "child", sessionKey: "agent:main:subagent:1" });
    const hits = (await grep.execute("c1", { query: "drawer" })).details as { hits: { session: string }[] };
    assert.deepEqual(new Set(hits.hits.map((x) => x.session)), new Set(["parent"]));
    const grant = h.plugin.grants.get("agent:main:subagent:1")!.grantId;
    await prepared!.rollback();
    h.plugin.client.acquire();
    await assert.rejects(
      h.plugin.client.call("grep", { session: "parent", query: "drawer" }, { deadlineMs: 30_000, grant }),
      /revoked/,
    );
    await h.plugin.client.release();
  });

  test("a brain that died is restarted and the idempotent call answered", async () => {
    h = harness();
    const engine = await h.engine();
    await engine.commitTurn!({ advancementKey: "a", messages: turn(1), sessionId: "s1" } as never);
    const first = h.plugin.client.pid!;
    process.kill(first, "SIGKILL");
    const pending = engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 4000 });
    const result = await pending;
    assert.equal(result.messages.length, 2);
    assert.notEqual(h.plugin.client.pid, first);
  });

  test("dispose shuts the daemon down once the last engine lets go", async () => {
    h = harness();
    const a = await h.engine();
    const b = await h.engine();
    await a.commitTurn!({ advancementKey: "a", messages: turn(1), sessionId: "s1" } as never);
    const pid = h.plugin.client.pid;
    assert.ok(pid);
    await a.dispose!();
    assert.equal(h.plugin.client.pid, pid);
    await b.dispose!();
    assert.equal(h.plugin.client.pid, undefined);
  });
});

describe("an overflow with everything outside the tail folded", { skip: needsBrain }, () => {
  // Turns long enough that a summary of a few is shorter than they are.
  const notes =
    " The staging cluster rotates its certificates on Mondays, the release train leaves on " +
    "Thursdays at noon, backups are verified nightly and incidents get a written review.";
  function wordy(n: number): Record<string, unknown>[] {
    return [
      user(`question ${n}: where is item ${n}?${notes.repeat(3)}`, T + n * 10),
      assistant([{ type: "text", text: `item ${n} is in drawer ${n}.${notes.repeat(3)}` }], T + n * 10 + 1),
    ];
  }

  test("compact folds into brain's fresh tail, keeping the newest turn, so OpenClaw's retry fits", async () => {
    h = harness();
    const engine = await h.engine();
    // Six turns: all inside brain's 32-message fresh tail, nothing outside it to fold.
    for (let i = 1; i <= 6; i++) {
      await engine.commitTurn!({ advancementKey: `a${i}`, messages: wordy(i), sessionId: "s1" } as never);
    }
    const before = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 100_000 });
    // A /compact (no overflow) has nothing to fold, as before.
    const plain = await engine.compact({ sessionId: "s1", sessionKey: "k", force: true });
    assert.equal(plain.compacted, false);
    // OpenClaw's overflow recovery: the request was 150 tokens over its budget.
    const result = await engine.compact({
      sessionId: "s1",
      sessionKey: "k",
      force: true,
      compactionTarget: "budget",
      tokenBudget: 32_000,
      currentTokenCount: 32_150,
    });
    assert.equal(result.ok, true);
    assert.equal(result.compacted, true);
    assert.ok(result.result!.tokensAfter! <= before.estimatedTokens - 150, JSON.stringify(result.result));
    const after = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 100_000 });
    const text = JSON.stringify(after.messages);
    assert.match(text, /<summary id=/);
    assert.ok(after.estimatedTokens < before.estimatedTokens);
    // The newest turn (its question and answer) is still there as it was said.
    assert.ok(text.includes("question 6: where is item 6?") && text.includes("item 6 is in drawer 6"));
    assert.ok(!text.includes("question 1: where is item 1?"));
  });
});

describe("turns OpenClaw ran without brain", { skip: needsBrain }, () => {
  test("assemble logs an error when the host's history ends with a turn brain never received", async () => {
    h = harness();
    const engine = await h.engine();
    await engine.commitTurn!({ advancementKey: "a1", messages: turn(1), sessionId: "s1" } as never);
    const bypassedLines = () => h!.logs.filter((l) => l.level === "error" && /never received/.test(l.message));
    // In step: the host's history is what brain was given.
    await engine.assemble({ sessionId: "s1", messages: turn(1) as never, tokenBudget: 4000 });
    // A failed turn (a prompt with no answer) is never committed: not a fallback.
    const failed = [...turn(1), user("question 2 that failed", T + 20)];
    await engine.assemble({ sessionId: "s1", messages: failed as never, tokenBudget: 4000 });
    assert.deepEqual(bypassedLines(), []);
    // Turn 2 ran on the legacy engine: its commit never came.
    const host = [...turn(1), ...turn(2)];
    await engine.assemble({ sessionId: "s1", messages: host as never, tokenBudget: 4000 });
    await engine.assemble({ sessionId: "s1", messages: host as never, tokenBudget: 4000 });
    const lines = bypassedLines();
    assert.equal(lines.length, 1, JSON.stringify(h.logs)); // once, however many assembles
    assert.match(lines[0]!.message, /session s1/);
    assert.match(lines[0]!.message, /legacy/);
    assert.match(lines[0]!.message, new RegExp(new Date(T + 21).toISOString()));
  });

  test("registration logs an error when OpenClaw's context-engine slot is not brain", () => {
    h = harness({ command: "/nonexistent/brain" }, undefined, { plugins: { slots: {} } });
    const errors = h.logs.filter((l) => l.level === "error").map((l) => l.message);
    assert.equal(errors.length, 1, errors.join("\n"));
    assert.match(errors[0]!, /plugins\.slots\.contextEngine selects "legacy"/);
  });

  test("commitTurn marks the turn as OpenClaw's: brain's info reports when the last one came", async () => {
    h = harness();
    const engine = await h.engine();
    const started = Date.now() - 1000;
    for (let i = 1; i <= 2; i++) {
      await engine.commitTurn!({ advancementKey: `adv-${i}`, messages: turn(i), sessionId: "s1" } as never);
    }
    h.plugin.client.acquire();
    const info = await h.plugin.client.call<{
      hosts: Record<string, { last_turn_at: string; session: string; key: string; turns: number }>;
    }>("info", {}, { deadlineMs: 30_000 });
    await h.plugin.client.release();
    const openclaw = info.hosts.openclaw!;
    assert.equal(openclaw.session, "s1");
    assert.equal(openclaw.key, "adv-2");
    assert.equal(openclaw.turns, 2);
    const at = Date.parse(openclaw.last_turn_at);
    assert.ok(at >= started && at <= Date.now(), openclaw.last_turn_at);
  });
});

describe("maintain", { skip: needsBrain }, () => {
  test("graph maintenance runs once per interval, across engine instances and processes", async () => {
    h = harness({ maintainEveryMs: 3_600_000 });
    const params = { sessionId: "s1", sessionFile: "agent:main:main" };
    const first = await (await h.engine()).maintain!(params);
    assert.equal(first.changed, false);
    assert.match(first.reason ?? "", /graph maintained/);
    // A fresh registration (as the next `openclaw agent --local` run makes) sees the stamp.
    const next = harness({ maintainEveryMs: 3_600_000, db: h.db });
    try {
      const second = await (await next.engine()).maintain!(params);
      assert.match(second.reason ?? "", /not due/);
    } finally {
      await next.close();
    }
  });
});

describe("messages kept out of context", { skip: needsBrain }, () => {
  test("a custom message with excludeFromContext is stored but never assembled", async () => {
    h = harness();
    const engine = await h.engine();
    const nested = {
      role: "custom",
      customType: "openclaw.nested-tool.v1",
      content: "memory_grep ran inside tool_call",
      display: true,
      excludeFromContext: true,
      details: { tool: "memory_grep" },
      timestamp: T + 2,
    };
    const messages = [...turn(1), nested];
    await engine.commitTurn!({ advancementKey: "a", messages, sessionId: "s1" } as never);
    const context = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 4000 });
    assert.deepEqual(
      context.messages.map((m) => m.role),
      ["user", "assistant"],
    );
    // A retried turn suppresses again without error and stores nothing.
    assert.deepEqual(await engine.commitTurn!({ advancementKey: "a", messages, sessionId: "s1" } as never), {
      status: "duplicate",
    });
    h.plugin.client.acquire();
    const kept = await h.plugin.client.call<{ message: Record<string, unknown> }>(
      "describe",
      { session: "s1", id: "a:2", include_suppressed: true },
      { deadlineMs: 30_000 },
    );
    await h.plugin.client.release();
    const { fromBrain } = await import("../dist/convert.js");
    assert.deepEqual(fromBrain(kept.message), nested);
  });
});

describe("short-lived hosts", { skip: needsBrain }, () => {
  // A small fold threshold and a two-message tail, as the e2e sets them: the
  // child inherits the host's environment (restored after each test).
  const saved: Record<string, string | undefined> = {};
  function brainEnv(env: Record<string, string>): void {
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  }
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  const FILLER =
    "the staging cluster rotates its certificates on Mondays, the release train leaves on " +
    "Thursdays at noon, backups are verified nightly and incidents get a written review. ";
  function longTurn(n: number): Record<string, unknown>[] {
    return [
      user(`question ${n}: where is item ${n}? ${FILLER.repeat(3)}`, T + n * 10),
      assistant([{ type: "text", text: `item ${n} is in drawer ${n}. ${FILLER.repeat(3)}` }], T + n * 10 + 1),
    ];
  }

  test("one process per turn still folds history: dispose waits for the compaction the commit made due", async () => {
    brainEnv({ BRAIN_FRESH_TAIL_COUNT: "2", BRAIN_COMPACTION_THRESHOLD_TOKENS: "300" });
    h = harness();
    // Each run as `openclaw agent --local` makes it: a fresh registration, one
    // commit, then dispose (the last reference: brain is shut down).
    for (let i = 1; i <= 4; i++) {
      const run = harness({ db: h.db });
      try {
        const engine = await run.engine();
        await engine.commitTurn!({ advancementKey: `a${i}`, messages: longTurn(i), sessionId: "s1" } as never);
        await engine.dispose!();
        assert.equal(run.plugin.client.pid, undefined);
      } finally {
        await run.close();
      }
    }
    const engine = await h.engine();
    const context = await engine.assemble({ sessionId: "s1", messages: [], tokenBudget: 100_000 });
    assert.match(JSON.stringify(context.messages), /<summary id=\\"sum_/);
    assert.ok(!h.logs.some((l) => /still running/.test(l.message)));
  });
});

describe("a bootstrap cut short", { skip: needsBrain }, () => {
  // A legacy transcript of turns 1..n: entry ids e<turn>-<i>, pages of one turn.
  function transcript(n: number): TranscriptEntry[][] {
    const pages = [];
    for (let t = 1; t <= n; t++) {
      pages.push(turn(t).map((message, i) => ({ entryId: `e${t}-${i}`, message: message as never })));
    }
    return pages;
  }

  async function contents(h: Harness, session: string): Promise<string[]> {
    h.plugin.client.acquire();
    const result = await h.plugin.client.call<{ messages: { content: unknown }[] }>(
      "assemble",
      { session, budget: 100_000, format: "anthropic", stubs: false },
      { deadlineMs: 30_000 },
    );
    await h.plugin.client.release();
    return result.messages.map((m) => JSON.stringify(m.content).match(/(question|item) \d+/)![0]);
  }

  test("is resumed by the next bootstrap after the newest entry stored, turns committed meanwhile included, nothing twice", async () => {
    let entries = transcript(3);
    let failAfter: number | undefined = 1; // the transcript turns unreadable after one page
    const sent: string[] = [];
    h = harness({}, async function* () {
      for (const [i, page] of entries.entries()) {
        if (failAfter !== undefined && i >= failAfter) throw new Error("the transcript is not readable yet");
        sent.push(...page.map((e) => e.entryId));
        yield page;
      }
    });
    const engine = await h.engine();
    const cut = await engine.bootstrap!({ sessionId: "s1", sessionFile: "" });
    assert.equal(cut.bootstrapped, false);
    assert.equal(await stored(h), 2);

    // The turn that follows: brain's copy is incomplete, so the host's history
    // stands in, and the commit is left to the import (the transcript has it next time).
    const host = entries.flat().map((e) => e.message);
    const assembled = await engine.assemble({ sessionId: "s1", messages: host as never, tokenBudget: 4000 });
    assert.deepEqual(assembled.messages, host);
    assert.deepEqual(
      await engine.commitTurn!({ advancementKey: "adv-4", messages: turn(4), sessionId: "s1" } as never),
      { status: "committed" },
    );
    entries = transcript(4);
    failAfter = undefined;
    sent.length = 0;

    // A new run (process): the import resumes after e1-1 and reaches the end.
    const next = harness({ db: h.db }, async function* () {
      for (const page of entries) {
        sent.push(...page.map((e) => e.entryId));
        yield page;
      }
    });
    try {
      const resumed = await (await next.engine()).bootstrap!({ sessionId: "s1", sessionFile: "" });
      assert.deepEqual(resumed, { bootstrapped: true, importedMessages: 6 });
      const again = await (await next.engine()).bootstrap!({ sessionId: "s1", sessionFile: "" });
      assert.equal(again.bootstrapped, false);
    } finally {
      await next.close();
    }
    assert.equal(await stored(h), 8);
    assert.deepEqual(await contents(h, "s1"), [
      "question 1", "item 1", "question 2", "item 2", "question 3", "item 3", "question 4", "item 4",
    ]);
    // Import done: turns are brain's again.
    assert.deepEqual(
      await engine.commitTurn!({ advancementKey: "adv-5", messages: turn(5), sessionId: "s1" } as never),
      { status: "committed" },
    );
    assert.equal(await stored(h), 10);
  });

  test("stops at its deadline, and the next bootstrap completes it", async () => {
    const deadlineMs = 3_000;
    let slow = true;
    const reader = async function* () {
      const pages = transcript(3);
      for (const [i, page] of pages.entries()) {
        // Past the first page the transcript is slow to read: the deadline passes.
        if (slow && i === 1) await new Promise((resolve) => setTimeout(resolve, deadlineMs + 200));
        yield page;
      }
    };
    h = harness({ deadlineMs }, reader);
    const first = await (await h.engine()).bootstrap!({ sessionId: "s1", sessionFile: "" });
    assert.deepEqual(first, {
      bootstrapped: true,
      importedMessages: 2,
      reason: "import continues at the next bootstrap",
    });
    slow = false;
    const next = harness({ db: h.db, deadlineMs }, reader);
    try {
      const second = await (await next.engine()).bootstrap!({ sessionId: "s1", sessionFile: "" });
      assert.deepEqual(second, { bootstrapped: true, importedMessages: 4 });
    } finally {
      await next.close();
    }
    assert.equal(await stored(h), 6);
    assert.deepEqual(await contents(h, "s1"), [
      "question 1", "item 1", "question 2", "item 2", "question 3", "item 3",
    ]);
  });
});
