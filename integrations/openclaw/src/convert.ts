/**
 * OpenClaw messages <-> brain messages, lossless both ways.
 *
 * OpenClaw's transcript messages (`user`, `assistant` with `text` /
 * `thinking` / `toolCall` blocks, `toolResult`, and the harness roles
 * `custom`, `bashExecution`, `branchSummary`, `compactionSummary`) become
 * brain messages in Anthropic shape, which brain understands: tool calls
 * are `tool_use` blocks paired by id with `tool_result` blocks (so stubs,
 * pairing and `memory_describe` work), thinking keeps its signature, and the
 * harness roles are rendered as user text so the model and `memory_grep` see
 * them, never dropped.
 *
 * Whatever that mapping cannot say (OpenClaw's role, `timestamp`, `usage`,
 * `api`, `provider`, `model`, `stopReason`, `toolName`, `details`, a
 * `thoughtSignature`, ...) is kept as the difference between the original
 * and what the plain inverse mapping gives back: on each block under
 * `openclaw_block`, and for the message under `openclaw_message` on its first
 * block. brain stores block members as sent (and leaves them out of token
 * counts and of what `assemble` shows the model), so `fromBrain(toBrain(m))`
 * deep-equals `m` for any message, including fields OpenClaw adds later.
 */

/** An OpenClaw transcript message (`AgentMessage`), as plain JSON. */
export type AgentMessage = { role: string; [key: string]: unknown };
/** A content block, as plain JSON. */
export type Block = { type: string; [key: string]: unknown };
/** A message as brain's `ingest` takes it. */
export interface BrainMessage {
  id?: string;
  role: "user" | "assistant" | "system" | "tool";
  content: string | Block[];
  created_at?: string;
}

const MESSAGE_KEY = "openclaw_message";
const BLOCK_KEY = "openclaw_block";
const DROP = "__drop";
const STRING = "__string";
const PLACEHOLDER = "__placeholder";

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** JSON with sorted keys: equal values give equal strings whatever the key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function same(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

/** What must be applied to `derived` to get `original` back (null: nothing). */
function difference(original: Json, derived: Json): Json | null {
  const out: Json = {};
  for (const [key, value] of Object.entries(original)) {
    if (value !== undefined && !same(value, derived[key])) out[key] = value;
  }
  const drop = Object.keys(derived).filter(
    (key) => derived[key] !== undefined && original[key] === undefined,
  );
  if (drop.length > 0) out[DROP] = drop;
  return Object.keys(out).length > 0 ? out : null;
}

function apply(derived: Json, diff: unknown): Json {
  if (!isObject(diff)) return derived;
  const out: Json = { ...derived };
  const drop = diff[DROP];
  if (Array.isArray(drop)) for (const key of drop) delete out[String(key)];
  for (const [key, value] of Object.entries(diff)) {
    if (key !== DROP && key !== STRING && key !== PLACEHOLDER) out[key] = value;
  }
  return out;
}

function withoutKey(block: Json, key: string): Json {
  const { [key]: _dropped, ...rest } = block;
  return rest;
}

// ---- blocks ---------------------------------------------------------------

function blockToBrainBase(block: Json): Block {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "thinking":
      if (block.redacted === true) {
        return { type: "redacted_thinking", data: block.thinkingSignature };
      }
      return typeof block.thinkingSignature === "string"
        ? { type: "thinking", thinking: block.thinking, signature: block.thinkingSignature }
        : { type: "thinking", thinking: block.thinking };
    case "toolCall":
      return { type: "tool_use", id: block.id, name: block.name, input: block.arguments };
    case "image":
      if (typeof block.data === "string") {
        return {
          type: "image",
          source: { type: "base64", media_type: block.mimeType, data: block.data },
        };
      }
      return { ...block, type: "image" };
    default:
      return { ...block, type: String(block.type) };
  }
}

function blockFromBrainBase(block: Json): Block {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "thinking":
      return typeof block.signature === "string"
        ? { type: "thinking", thinking: block.thinking, thinkingSignature: block.signature }
        : { type: "thinking", thinking: block.thinking };
    case "redacted_thinking":
      return { type: "thinking", thinking: "", thinkingSignature: block.data, redacted: true };
    case "tool_use":
      return { type: "toolCall", id: block.id, name: block.name, arguments: block.input ?? {} };
    case "image": {
      const source = block.source;
      if (isObject(source) && source.type === "base64") {
        return { type: "image", data: source.data, mimeType: source.media_type };
      }
      return { ...block, type: "image" };
    }
    default:
      return { ...block, type: String(block.type) };
  }
}

/** One OpenClaw block in brain's (Anthropic) shape, carrying what that shape cannot say. */
export function blockToBrain(block: unknown): Block {
  const original: Json = isObject(block) ? block : { type: "text", text: String(block) };
  const mapped = blockToBrainBase(original);
  const diff = difference(original, blockFromBrainBase(mapped));
  return diff ? { ...mapped, [BLOCK_KEY]: diff } : mapped;
}

/** The OpenClaw block `blockToBrain` was given (or the plain inverse for any brain block). */
export function blockFromBrain(block: unknown): Block {
  if (!isObject(block)) return { type: "text", text: String(block) };
  const base = blockFromBrainBase(withoutKey(withoutKey(block, BLOCK_KEY), MESSAGE_KEY));
  return apply(base, block[BLOCK_KEY]) as Block;
}

function blocksToBrain(content: unknown): Block[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content.map(blockToBrain) : [];
}

function blocksFromBrain(content: unknown): Block[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content.map(blockFromBrain) : [];
}

// ---- messages -------------------------------------------------------------

function text(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value ?? "");
}

/** How a harness role reads as user text: to the model and to `memory_grep`. */
function render(message: AgentMessage): string {
  switch (message.role) {
    case "compactionSummary":
      return `[Summary of earlier conversation]\n${text(message.summary)}`;
    case "branchSummary":
      return `[Summary of a branch of this conversation]\n${text(message.summary)}`;
    case "bashExecution": {
      const exit = message.cancelled === true ? "cancelled" : `exit ${text(message.exitCode)}`;
      return `[Shell] $ ${text(message.command)}\n${text(message.output)}\n(${exit})`;
    }
    default:
      return `[${message.role}] ${canonical(withoutKey(message, "role"))}`;
  }
}

function toBrainBase(message: AgentMessage): BrainMessage {
  switch (message.role) {
    case "user":
    case "system":
      return {
        role: message.role,
        content:
          typeof message.content === "string" ? message.content : blocksToBrain(message.content),
      };
    case "assistant":
      return { role: "assistant", content: blocksToBrain(message.content) };
    case "toolResult": {
      const result: Block = {
        type: "tool_result",
        tool_use_id: message.toolCallId,
        content: blocksToBrain(message.content),
      };
      if (message.isError === true) result.is_error = true;
      return { role: "user", content: [result] };
    }
    case "custom":
      // A custom message's content is what the model would see; keep it as such.
      return {
        role: "user",
        content:
          typeof message.content === "string" ? message.content : blocksToBrain(message.content),
      };
    default:
      return { role: "user", content: render(message) };
  }
}

/** The plain inverse of the base mapping: one brain message to one OpenClaw message. */
function fromBrainBase(message: Json): AgentMessage {
  const role = typeof message.role === "string" ? message.role : "user";
  const content = message.content;
  if (role === "user" && Array.isArray(content) && content.length === 1) {
    const only = content[0];
    if (isObject(only) && only.type === "tool_result" && !isObject(only[MESSAGE_KEY])) {
      return toolResultFromBrain(only, "");
    }
  }
  if (role === "assistant") return { role, content: blocksFromBrain(content) };
  if (typeof content === "string") return { role, content };
  return { role, content: blocksFromBrain(content) };
}

function toolResultFromBrain(block: Json, toolName: string): AgentMessage {
  const base: AgentMessage = {
    role: "toolResult",
    toolCallId: block.tool_use_id,
    toolName,
    content: blocksFromBrain(block.content),
    isError: block.is_error === true,
  };
  return apply(base, block[BLOCK_KEY]) as AgentMessage;
}

function isoTime(value: unknown): string | undefined {
  if (typeof value !== "number" || !Number.isFinite(value)) return undefined;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/**
 * One OpenClaw message as a brain message with client id `id`.
 *
 * `created_at` comes from the message's `timestamp` (epoch ms) when it has
 * one, so brain's times are the transcript's.
 */
export function toBrain(message: AgentMessage, id?: string): BrainMessage {
  const out = toBrainBase(message);
  const diff = difference(message, fromBrainBase(out as unknown as Json));
  if (diff) {
    if (typeof out.content === "string") {
      out.content = [{ type: "text", text: out.content, [MESSAGE_KEY]: { ...diff, [STRING]: true } }];
    } else if (out.content.length === 0) {
      out.content = [{ type: "text", text: "", [MESSAGE_KEY]: { ...diff, [PLACEHOLDER]: true } }];
    } else {
      const [first, ...rest] = out.content as [Block, ...Block[]];
      out.content = [{ ...first, [MESSAGE_KEY]: diff }, ...rest];
    }
  }
  const created = isoTime(message.timestamp);
  if (created) out.created_at = created;
  if (id !== undefined) out.id = id;
  return out;
}

/** The OpenClaw message `toBrain` was given, from the message brain stored (`describe`). */
export function fromBrain(message: Json): AgentMessage {
  const content = message.content;
  const first: unknown = Array.isArray(content) ? content[0] : undefined;
  const envelope = isObject(first) ? first[MESSAGE_KEY] : undefined;
  if (!isObject(envelope)) return fromBrainBase(message);
  let plain: Json = message;
  if (envelope[STRING] === true && isObject(first)) {
    plain = { ...message, content: first.text };
  } else if (envelope[PLACEHOLDER] === true) {
    plain = { ...message, content: [] };
  } else if (Array.isArray(content) && isObject(first)) {
    plain = { ...message, content: [withoutKey(first, MESSAGE_KEY), ...content.slice(1)] };
  }
  return apply(fromBrainBase(plain), envelope) as AgentMessage;
}

/** What an assembled assistant message lacks and OpenClaw requires. */
export interface AssistantDefaults {
  api: string;
  provider: string;
  model: string;
}

const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

/**
 * brain's assembled context (Anthropic format) as OpenClaw messages for the model.
 *
 * A user message of tool results becomes one `toolResult` message per
 * result (named after the call it answers), the rest of its blocks a user
 * message; summaries and stubs stay user text. `assemble` gives back no
 * per-message metadata, so assistant messages get `defaults` (the current
 * model), zero usage and a stop reason that matches their blocks, and times
 * are ascending and just before `now`.
 */
export function fromAssembled(
  messages: Json[],
  defaults: AssistantDefaults,
  now = Date.now(),
  known: readonly AgentMessage[] = [],
): AgentMessage[] {
  const out: AgentMessage[] = [];
  const toolNames = new Map<string, string>();
  for (const message of messages) {
    const role = message.role;
    const content = message.content;
    if (role === "assistant") {
      const restored = fromBrain(message);
      const blocks = Array.isArray(restored.content) ? (restored.content as Block[]) : [];
      for (const block of blocks) {
        if (block.type === "toolCall" && typeof block.id === "string") {
          toolNames.set(block.id, String(block.name ?? ""));
        }
      }
      out.push({
        api: defaults.api,
        provider: defaults.provider,
        model: defaults.model,
        usage: ZERO_USAGE,
        stopReason: blocks.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
        ...restored,
        role: "assistant",
        content: blocks,
      });
      continue;
    }
    if (role === "user" && Array.isArray(content)) {
      const others: Json[] = [];
      for (const block of content) {
        if (isObject(block) && block.type === "tool_result") {
          const id = String(block.tool_use_id ?? "");
          out.push(toolResultFromBrain(block, toolNames.get(id) ?? "unknown"));
        } else if (isObject(block)) {
          others.push(block);
        }
      }
      if (others.length > 0) out.push(fromBrain({ role: "user", content: others }));
      continue;
    }
    out.push(fromBrain({ role: "user", content: typeof content === "string" ? content : "" }));
  }
  // A message the host's transcript holds comes back as the host's own (its
  // time, usage, model, ...); the others (summaries, stubs, messages older
  // than the host's window) are timed after the message before them, since
  // OpenClaw shows the model each message's time and assemble does not say it.
  const pool = new Map<string, AgentMessage[]>();
  for (const message of known) {
    const key = matchKey(message);
    pool.set(key, [...(pool.get(key) ?? []), message]);
  }
  let last: number | undefined;
  return out.map((message, i) => {
    const same = pool.get(matchKey(message))?.shift();
    const chosen = same ?? message;
    const own = chosen.timestamp;
    const timestamp =
      typeof own === "number" ? own : last !== undefined ? last + 1 : now - out.length + i;
    last = timestamp;
    return chosen === message && message.timestamp !== timestamp ? { ...message, timestamp } : chosen;
  });
}

function stripped(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripped);
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const [key, member] of Object.entries(value)) {
    if (key !== MESSAGE_KEY && key !== BLOCK_KEY) out[key] = stripped(member);
  }
  return out;
}

/** What two messages share when brain would show the model the same thing for both. */
export function matchKey(message: AgentMessage): string {
  const brain = toBrain(message);
  const content =
    typeof brain.content === "string" ? [{ type: "text", text: brain.content }] : brain.content;
  return canonical({ role: brain.role, content: stripped(content) });
}
