/** Message conversion: every OpenClaw role survives a trip through brain unchanged. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { fromAssembled, fromBrain, toBrain } from "../dist/convert.js";
import { assistant, harness, needsBrain, user, type Harness } from "./helpers.ts";

const T = 1_763_942_400_123;

/** One message of each shape OpenClaw 2026.9 writes into a transcript. */
const MESSAGES: Record<string, unknown>[] = [
  user("Where does the deploy key live?", T),
  {
    role: "user",
    content: [
      { type: "text", text: "and this screenshot" },
      { type: "image", data: "aGVsbG8=", mimeType: "image/png" },
    ],
    timestamp: T + 1,
    runtimeContextCarrier: true,
  },
  {
    ...assistant(
      [
        { type: "thinking", thinking: "look it up", thinkingSignature: "sig-1" },
        { type: "thinking", thinking: "", thinkingSignature: "opaque", redacted: true },
        { type: "text", text: "Checking.", textSignature: "ts" },
        {
          type: "toolCall",
          id: "call_1",
          name: "read",
          arguments: { path: "vault/ci" },
          thoughtSignature: "th",
        },
      ],
      T + 2,
    ),
    responseId: "resp_9",
    turnId: "turn-1",
  },
  {
    role: "toolResult",
    toolCallId: "call_1",
    toolName: "read",
    content: [{ type: "text", text: "key: vault/ci/deploy" }],
    details: { bytes: 20 },
    isError: false,
    timestamp: T + 3,
  },
  {
    role: "toolResult",
    toolCallId: "call_2",
    toolName: "exec",
    content: [{ type: "text", text: "permission denied" }],
    isError: true,
    timestamp: T + 4,
  },
  { ...assistant([], T + 5), stopReason: "error", errorMessage: "upstream 500" },
  {
    role: "custom",
    customType: "note",
    content: "remember the vault",
    display: true,
    details: { a: 1 },
    timestamp: T + 6,
  },
  {
    role: "bashExecution",
    command: "ls vault",
    output: "ci\n",
    exitCode: 0,
    cancelled: false,
    truncated: false,
    timestamp: T + 7,
  },
  { role: "branchSummary", summary: "Tried the other vault.", fromId: "e12", timestamp: T + 8 },
  {
    role: "compactionSummary",
    summary: "Earlier: set up CI.",
    tokensBefore: 5000,
    tokensAfter: 300,
    firstKeptEntryId: "e40",
    timestamp: "2025-11-24T00:00:00.000Z",
  },
];

describe("conversion without brain", () => {
  test("every OpenClaw message shape comes back deep-equal from its brain form", () => {
    for (const message of MESSAGES) {
      const stored = toBrain(message as never, "id-1");
      const { id, created_at, ...body } = stored;
      assert.equal(id, "id-1");
      assert.deepEqual(fromBrain(body as never), message, String(message.role));
    }
  });

  test("brain gets Anthropic shapes it understands: tool_use paired with tool_result", () => {
    const call = toBrain(MESSAGES[2] as never);
    const blocks = call.content as { type: string }[];
    assert.deepEqual(
      blocks.map((b) => b.type),
      ["thinking", "redacted_thinking", "text", "tool_use"],
    );
    const result = toBrain(MESSAGES[3] as never);
    assert.equal(result.role, "user");
    const [block] = result.content as { type: string; tool_use_id: string }[];
    assert.equal(block?.type, "tool_result");
    assert.equal(block?.tool_use_id, "call_1");
    assert.equal(result.created_at, new Date(T + 3).toISOString());
  });

  test("harness roles are rendered as text the model and grep can read", () => {
    const bash = toBrain(MESSAGES[7] as never);
    const [first] = bash.content as unknown as { text: string }[];
    assert.match(first?.text ?? "", /\$ ls vault\nci\n/);
    const summary = toBrain(MESSAGES[9] as never);
    const [block] = summary.content as unknown as { text: string }[];
    assert.match(block?.text ?? "", /Earlier: set up CI\./);
  });

  test("assembled tool results get back the name of the call they answer", () => {
    const out = fromAssembled(
      [
        { role: "user", content: [{ type: "text", text: "hi" }] },
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "c9", name: "memory_grep", input: { query: "x" } }],
        },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "c9", content: [{ type: "text", text: "r" }] }],
        },
      ],
      { api: "openai-completions", provider: "fake", model: "m" },
      1000,
    );
    assert.deepEqual(
      out.map((m) => m.role),
      ["user", "assistant", "toolResult"],
    );
    assert.equal(out[2]?.toolName, "memory_grep");
    assert.equal(out[1]?.stopReason, "toolUse");
    assert.equal(out[1]?.provider, "fake");
    assert.deepEqual(
      out.map((m) => m.timestamp),
      [997, 998, 999],
    );
  });
});

test("assembled messages the host's transcript holds come back as the host's own", () => {
  const host = [user("first", T), { ...assistant([{ type: "text", text: "reply" }], T + 5), responseId: "r1" }];
  const out = fromAssembled(
    [
      { role: "user", content: [{ type: "text", text: '<summary id="sum_1">older</summary>' }] },
      { role: "user", content: [{ type: "text", text: "first" }] },
      { role: "assistant", content: [{ type: "text", text: "reply" }] },
      { role: "user", content: [{ type: "text", text: "not in the host's window" }] },
    ],
    { api: "x", provider: "y", model: "z" },
    T + 1000,
    host as never,
  );
  assert.deepEqual(out[1], host[0]);
  assert.deepEqual(out[2], host[1]);
  assert.equal(out[3]?.timestamp, T + 6);
  assert.equal(typeof out[0]?.timestamp, "number");
});

describe("conversion through a real brain", { skip: needsBrain }, () => {
  let h: Harness;
  before(() => {
    h = harness();
  });
  after(async () => {
    await h.close();
  });

  test("what describe gives back is what OpenClaw sent, field for field", async () => {
    const client = h.plugin.client;
    client.acquire();
    const messages = MESSAGES.map((m, i) => toBrain(m as never, `m${i}`));
    const stored = await client.call<{ ingested: number }>(
      "ingest",
      { session: "conv", messages },
      { deadlineMs: 30_000 },
    );
    assert.equal(stored.ingested, MESSAGES.length);
    for (const [i, message] of MESSAGES.entries()) {
      const got = await client.call<{ message: Record<string, unknown> }>(
        "describe",
        { session: "conv", id: `m${i}` },
        { deadlineMs: 30_000 },
      );
      assert.deepEqual(fromBrain(got.message), message, String(message.role));
    }
    await client.release();
  });
});
