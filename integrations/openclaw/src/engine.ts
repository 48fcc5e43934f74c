/**
 * The context engine: OpenClaw's lifecycle hooks mapped onto brain's methods.
 *
 * brain is the store of record for what the model sees: `commitTurn` stores
 * each accepted turn (ids from its advancement key, so a retried turn is a
 * duplicate), `assemble` asks brain for the context under the budget (never
 * from the host's `messages`, which may hold this engine's own earlier
 * injections), `compact` folds history into summaries. On the turn's path a
 * brain that is slow or gone never holds the host past `deadlineMs`.
 */
import { createHash } from "node:crypto";
import { statSync, writeFileSync } from "node:fs";

import type { OpenClawPluginApi } from "openclaw/plugin-sdk/plugin-entry";

import { BrainClient, BrainError, type Logger } from "./client.js";
import type { BrainPluginConfig } from "./config.js";
import {
  fromAssembled,
  toBrain,
  type AgentMessage,
  type AssistantDefaults,
} from "./convert.js";
import type { SubagentGrants } from "./grants.js";
import { finishImport, markImport, pendingImport } from "./imports.js";

type Factory = Parameters<OpenClawPluginApi["registerContextEngine"]>[1];
/** OpenClaw's ContextEngine interface, as the installed SDK declares it. */
export type ContextEngine = Awaited<ReturnType<Factory>>;
type HostMessage = Parameters<ContextEngine["ingest"]>[0]["message"];
type SessionTarget = NonNullable<Parameters<NonNullable<ContextEngine["bootstrap"]>>[0]["sessionTarget"]>;

/** The engine id (also the plugin id): `plugins.slots.contextEngine: "brain"`. */
export const ENGINE_ID = "brain";
export const VERSION = "0.1.0";
/** The host name the engine marks its committed turns with (`ingest`'s `turn.host`). */
export const HOST = "openclaw";

/** One entry of OpenClaw's visible transcript (`readSessionTranscriptVisibleMessageDelta`). */
export interface TranscriptEntry {
  entryId: string;
  message: AgentMessage;
}

/** Reads a session's history before the current turn, oldest first, in pages. */
export type HistoryReader = (target: {
  agentId?: string;
  sessionId: string;
  sessionKey?: string;
  storePath?: string;
}) => AsyncIterable<TranscriptEntry[]>;

/** What the engine needs from the plugin. */
export interface EngineDeps {
  client: BrainClient;
  config: BrainPluginConfig;
  log: Logger;
  grants: SubagentGrants;
  readHistory: HistoryReader;
}

const BATCH = 500;

/**
 * Told to the model when the context holds summaries or stubs, or left
 * history out: OpenClaw may list the plugin's tools only through its tool
 * search, so they are named here.
 */
export const RECALL_GUIDANCE =
  "Earlier parts of this conversation are stored in full in brain but shown here folded " +
  '(<summary id="sum_..."> blocks) or as [Tool Output: ...] stubs, or left out. Before ' +
  "saying you do not know something from earlier, look it up: memory_grep to find it, " +
  "memory_describe for one item by id, memory_expand to open a summary, " +
  "memory_expand_query for a cited answer (call them through tool_call if they are not listed).";
const NOT_FOUND = -32001;

// When graph maintenance last ran, as the mtime of a stamp file beside the
// database: `openclaw agent --local` is a new process every turn, so an
// in-memory clock would run it every turn.
function lastMaintained(stamp: string): number {
  try {
    return statSync(stamp).mtimeMs;
  } catch {
    return 0;
  }
}

function markMaintained(stamp: string, log: Logger): void {
  try {
    writeFileSync(stamp, `${new Date().toISOString()}\n`);
  } catch (error) {
    log.warn(`brain: cannot write ${stamp}: ${describe(error)}`);
  }
}

function asAgent(message: HostMessage): AgentMessage {
  return message as unknown as AgentMessage;
}

function contentId(message: AgentMessage): string {
  // A message given to ingest has no id of its own: one derived from its
  // content (timestamp included) makes a replay a duplicate, not a copy.
  const hash = createHash("sha256").update(JSON.stringify(message)).digest("hex");
  return `oc-${hash.slice(0, 32)}`;
}

function excludedFromContext(message: AgentMessage): boolean {
  return message.role === "custom" && message.excludeFromContext === true;
}

function estimate(messages: unknown[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}

function when(timestamp: unknown): string {
  return typeof timestamp === "number" && Number.isFinite(timestamp)
    ? new Date(timestamp).toISOString()
    : "an unknown time";
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The model fields of the newest assistant message the host has, for assembled ones. */
function assistantDefaults(messages: HostMessage[], model: string | undefined): AssistantDefaults {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as unknown as Record<string, unknown>;
    if (m.role === "assistant" && typeof m.api === "string" && typeof m.provider === "string") {
      return { api: m.api, provider: m.provider, model: String(m.model ?? model ?? "") };
    }
  }
  return { api: "openai-completions", provider: "brain", model: model ?? "unknown" };
}

const SETTLE_POLL_MS = 50;

/** What brain's `compact` answers. */
interface CompactReport {
  summaries: string[];
  tokens_before: number;
  tokens_after: number;
  leaf_passes: number;
  condensed_passes: number;
}

/** How much more than the overflow a compaction takes off (estimates differ). */
const OVERFLOW_MARGIN = 1.1;

/** Tokens the host's request was over its budget (0: not an overflow, or unknown). */
export function overflow(tokenBudget: number | undefined, current: number | undefined): number {
  if (tokenBudget === undefined || current === undefined) return 0;
  if (!Number.isFinite(tokenBudget) || !Number.isFinite(current)) return 0;
  return Math.max(0, Math.ceil(current - tokenBudget));
}

/**
 * Wait until brain's `info` reports no background compaction running or
 * waiting (`compaction.active == 0`), for at most `withinMs` (each `info` at
 * most `callMs`: a brain that does not answer is not waited on). A compaction
 * still running then is left to brain's shutdown, which lets its current
 * pass finish and commits what it folded.
 */
export async function settleCompactions(
  client: BrainClient,
  withinMs: number,
  callMs: number,
  log: Logger,
): Promise<boolean> {
  const until = Date.now() + withinMs;
  try {
    for (;;) {
      const left = until - Date.now();
      if (left <= 0) break;
      const info = await client.call<{ compaction?: { active?: number } }>(
        "info",
        {},
        { deadlineMs: Math.min(left, callMs), idempotent: true },
      );
      if (!info.compaction?.active) return true;
      await new Promise((resolve) => setTimeout(resolve, Math.min(SETTLE_POLL_MS, left)));
    }
  } catch (error) {
    log.warn(`brain: could not wait for compaction before shutdown: ${describe(error)}`);
    return false;
  }
  log.warn(`brain: a compaction was still running after ${withinMs} ms; brain finishes its current pass`);
  return false;
}

/**
 * The host's newest answer when brain's context lacks it: the previous turn ran
 * without this engine (OpenClaw degraded it to legacy, or quarantined brain), so
 * its commit never came. Only a finished answer counts (`stopReason` stop or
 * length): a failed or aborted turn is never committed, by OpenClaw's contract.
 * `assembled` holds the host's own objects for the messages brain gave back
 * (`fromAssembled`), so being in it is being in brain.
 */
export function bypassed(host: AgentMessage[], assembled: AgentMessage[]): AgentMessage | undefined {
  for (let i = host.length - 1; i >= 0; i--) {
    const m = host[i]!;
    if (m.role === "custom" || m.role === "toolResult") continue;
    if (m.role !== "assistant") return undefined; // a prompt with no answer: a failed turn
    const stop = (m as { stopReason?: unknown }).stopReason;
    if (stop !== "stop" && stop !== "length") return undefined;
    return assembled.includes(m) ? undefined : m;
  }
  return undefined;
}

/** A context engine over `deps.client`; it holds a reference on the child until disposed. */
export function createEngine(deps: EngineDeps): ContextEngine {
  const { client, config, log, grants } = deps;
  client.acquire();
  let disposed = false;
  // Turns already reported as run without brain (assemble runs several times a turn).
  const reported = new WeakSet<AgentMessage>();

  // Messages OpenClaw keeps out of the model's context (custom ones with
  // excludeFromContext, e.g. its nested-tool records) are stored, then
  // suppressed: brain never assembles, greps or summarises them, and
  // `describe` with include_suppressed still gives them back.
  // `turn`: the items are one turn committed through this engine; brain records
  // it (with the last batch, so a turn of several transactions counts once) as
  // OpenClaw's last turn, which `brain info` reports under `hosts.openclaw`.
  async function ingest(
    session: string,
    key: string | undefined,
    items: { message: AgentMessage; id: string }[],
    deadlineMs = config.deadlineMs,
    turn?: { host: string; key: string },
  ) {
    let ingested = 0;
    for (let i = 0; i < items.length; i += BATCH) {
      const batch = items.slice(i, i + BATCH);
      const params: Record<string, unknown> = {
        session,
        messages: batch.map((item) => toBrain(item.message, item.id)),
      };
      if (key) params.session_key = key;
      if (turn && i + BATCH >= items.length) params.turn = turn;
      const result = await client.call<{ ingested: number }>("ingest", params, {
        deadlineMs,
        idempotent: true,
      });
      ingested += result.ingested;
      const hidden = batch.filter((item) => excludedFromContext(item.message)).map((item) => item.id);
      if (hidden.length > 0) {
        await client.call(
          "suppress",
          { session, ids: hidden },
          { deadlineMs: config.deadlineMs, idempotent: true },
        );
      }
    }
    return ingested;
  }

  // While a bootstrap import of the session is unfinished, brain's copy lacks
  // part of its history (and the turns since).
  function importing(session: string): boolean {
    return pendingImport(config.db, session) !== undefined;
  }

  async function holdsSession(session: string): Promise<boolean> {
    try {
      const result = await client.call<{ hits: unknown[] }>(
        "grep",
        { session, query: ".", mode: "regex", limit: 1 },
        { deadlineMs: config.deadlineMs, idempotent: true },
      );
      return result.hits.length > 0;
    } catch (error) {
      // brain answers a read of a session it does not hold with NotFound (-32001).
      if (error instanceof BrainError && error.code === NOT_FOUND) return false;
      throw error;
    }
  }

  const engine: ContextEngine = {
    info: {
      id: ENGINE_ID,
      name: "brain (lossless memory)",
      version: VERSION,
      ownsCompaction: true,
      acceptedHostParams: [
        "sessionKey",
        "sessionTarget",
        "runtimeSettings",
        "runtimeContext",
        "abortSignal",
      ],
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
      // Graph maintenance is never worth delaying a reply for.
      turnMaintenanceMode: "background",
    },

    // History before brain knew the session (switching from another engine)
    // comes from the host's transcript API, ids = entry ids; a session brain
    // already holds was filled by commitTurn and is left alone. The import is
    // bounded by deadlineMs: one cut short (the deadline, a crash, the
    // transcript unreadable) keeps its cursor and the next bootstrap resumes
    // after the newest entry stored, up to the transcript's end (turns
    // committed meanwhile included: commitTurn leaves those to it).
    async bootstrap({ sessionId, sessionKey, sessionTarget }) {
      const started = Date.now();
      try {
        const pending = pendingImport(config.db, sessionId);
        if (!pending && (await holdsSession(sessionId))) {
          return { bootstrapped: false, reason: "brain already holds this session" };
        }
        // Before the first message is sent: a crash mid-import still leaves the mark.
        if (!pending) markImport(config.db, sessionId, null);
        const target = { ...(sessionTarget as SessionTarget | undefined), sessionId };
        if (sessionKey && !target.sessionKey) target.sessionKey = sessionKey;
        let imported = 0;
        let after = pending?.last ?? null;
        for (;;) {
          let skipping = after;
          for await (const page of deps.readHistory(target as Parameters<HistoryReader>[0])) {
            let entries = page;
            if (skipping !== null) {
              const at = entries.findIndex((e) => e.entryId === skipping);
              if (at < 0) continue;
              entries = entries.slice(at + 1);
              skipping = null;
            }
            if (entries.length === 0) continue;
            const left = config.deadlineMs - (Date.now() - started);
            if (left <= 0) {
              log.info(
                `brain: bootstrap of session ${sessionId} stopped at its deadline after ` +
                  `${imported} messages; the next turn continues it`,
              );
              return {
                bootstrapped: true,
                importedMessages: imported,
                reason: "import continues at the next bootstrap",
              };
            }
            const batch = entries.map((e) => ({ message: e.message, id: `oc-entry-${e.entryId}` }));
            imported += await ingest(sessionId, sessionKey, batch, left);
            markImport(config.db, sessionId, entries[entries.length - 1]!.entryId);
          }
          if (skipping === null) break;
          // The entry last stored is gone from the transcript (rewritten): send it
          // all again; what brain holds already answers duplicate.
          after = null;
        }
        finishImport(config.db, sessionId);
        return { bootstrapped: true, importedMessages: imported };
      } catch (error) {
        log.warn(`brain: bootstrap of session ${sessionId} failed: ${describe(error)}`);
        return { bootstrapped: false, reason: describe(error) };
      }
    },

    async ingest({ sessionId, sessionKey, message }) {
      if (importing(sessionId)) return { ingested: false };
      const m = asAgent(message);
      const n = await ingest(sessionId, sessionKey, [{ message: m, id: contentId(m) }]);
      return { ingested: n > 0 };
    },

    async ingestBatch({ sessionId, sessionKey, messages }) {
      if (importing(sessionId)) return { ingestedCount: 0 };
      const batch = messages.map((message) => {
        const m = asAgent(message);
        return { message: m, id: contentId(m) };
      });
      return { ingestedCount: await ingest(sessionId, sessionKey, batch) };
    },

    // One ingest call is one brain transaction: the whole turn lands or none
    // of it; a retry with the same key finds every id stored.
    async commitTurn({ advancementKey, messages, sessionId, sessionKey }) {
      // Mid-import the turn is left to the import, which reaches it in the
      // transcript: stored now it would sit before older history, then again
      // under its entry id.
      if (importing(sessionId)) return { status: "committed" };
      const batch = messages.map((m, i) => ({ message: asAgent(m), id: `${advancementKey}:${i}` }));
      if (batch.length > BATCH) {
        log.warn(`brain: a turn of ${batch.length} messages is stored in several transactions`);
      }
      const stored =
        batch.length === 0
          ? 0
          : await ingest(sessionId, sessionKey, batch, config.deadlineMs, {
              host: HOST,
              key: advancementKey,
            });
      return { status: stored > 0 || batch.length === 0 ? "committed" : "duplicate" };
    },

    async assemble({ sessionId, messages, tokenBudget, runtimeSettings, model }) {
      const budget =
        tokenBudget ?? runtimeSettings?.limits.promptTokenBudget ?? config.defaultBudget;
      const params: Record<string, unknown> = {
        session: sessionId,
        budget: Math.max(1, Math.floor(budget)),
        format: "anthropic",
        stubs: config.stubs,
        detail: config.detail,
      };
      if (config.recall) params.recall = config.recall;
      if (importing(sessionId)) {
        log.info(
          `brain: the import of session ${sessionId}'s history is not finished; ` +
            "the host's messages stand in for this turn",
        );
        return { messages, estimatedTokens: estimate(messages) };
      }
      try {
        const result = await client.call<{
          messages: Record<string, unknown>[];
          system: string | null;
          tokens: number;
          included: { summaries: number };
          dropped: { summaries: number; messages: number };
          gaps?: { count: number };
          stubbed: number;
        }>("assemble", params, { deadlineMs: config.deadlineMs, idempotent: true });
        const resolved = runtimeSettings?.model.resolved ?? model;
        const assembled = fromAssembled(
          result.messages,
          assistantDefaults(messages, resolved ?? undefined),
          Date.now(),
          messages.map(asAgent),
        );
        const missed = bypassed(messages.map(asAgent), assembled);
        if (missed && !reported.has(missed)) {
          reported.add(missed);
          log.error(
            `brain: session ${sessionId}'s history ends with a turn brain never received ` +
              `(an answer of ${when(missed.timestamp)}): OpenClaw ran it ` +
              "without the brain engine, on its fallback (legacy) engine. brain's memory and this " +
              "context lack it. Check OpenClaw's log for 'degraded to' or 'quarantin' lines, " +
              "and `brain info` (hosts.openclaw.last_turn_at) for the last turn brain committed",
          );
        }
        // Only when part of the history is folded, stubbed or left out does
        // the model need telling how to get it back.
        const hidden =
          result.included.summaries +
          result.dropped.summaries +
          result.dropped.messages +
          (result.gaps?.count ?? 0) +
          result.stubbed;
        const addition = [result.system, hidden > 0 ? RECALL_GUIDANCE : null].filter(Boolean);
        return {
          messages: assembled as unknown as HostMessage[],
          estimatedTokens: result.tokens,
          ...(addition.length > 0 ? { systemPromptAddition: addition.join("\n\n") } : {}),
        };
      } catch (error) {
        // The turn goes on with the host's own history rather than wait or fail.
        log.warn(
          `brain: assemble for session ${sessionId} failed (${describe(error)}); ` +
            "this turn uses the host's messages",
        );
        return { messages, estimatedTokens: estimate(messages) };
      }
    },

    // A full sweep folds everything outside brain's fresh tail. On an overflow
    // (OpenClaw's recovery gives the request's size and the budget it passed) that
    // may not be enough, or nothing at all when the rest is folded already: then
    // brain folds into the tail too, down to a target that takes off what the
    // request was over (and a margin: brain's token estimate is not the model's),
    // keeping the newest user message and what follows it. Without it OpenClaw
    // finds nothing compacted and fails the turn.
    async compact({ sessionId, abortSignal, tokenBudget, currentTokenCount }) {
      abortSignal?.throwIfAborted();
      const options = {
        deadlineMs: config.compactDeadlineMs,
        idempotent: true,
        ...(abortSignal ? { signal: abortSignal } : {}),
      };
      try {
        const sweep = await client.call<CompactReport>("compact", { session: sessionId }, options);
        const reports = [sweep];
        const over = overflow(tokenBudget, currentTokenCount);
        const freed = sweep.tokens_before - sweep.tokens_after;
        const need = Math.ceil(over * OVERFLOW_MARGIN) - freed;
        if (over > 0 && need > 0 && sweep.tokens_after > 0) {
          const target = Math.max(0, sweep.tokens_after - need);
          reports.push(
            await client.call<CompactReport>(
              "compact",
              { session: sessionId, target_tokens: target, fold_tail: true },
              options,
            ),
          );
        }
        const last = reports[reports.length - 1]!;
        const summaries = reports.flatMap((r) => r.summaries);
        return {
          ok: true,
          compacted: summaries.length > 0,
          ...(summaries.length > 0 ? {} : { reason: "nothing left to fold" }),
          result: {
            tokensBefore: sweep.tokens_before,
            tokensAfter: last.tokens_after,
            details: { ...last, summaries, passes: reports },
          },
        };
      } catch (error) {
        if (error instanceof BrainError && error.code === NOT_FOUND) {
          return { ok: true, compacted: false, reason: "brain holds no history for this session" };
        }
        throw error;
      }
    },

    // brain never rewrites OpenClaw's transcript; the hook runs brain's graph
    // maintenance (decay, merge, prune, ...) at most every maintainEveryMs.
    async maintain({ abortSignal }) {
      const unchanged = { changed: false, bytesFreed: 0, rewrittenEntries: 0 };
      const stamp = `${config.db}.openclaw-maintained`;
      if (config.maintainEveryMs <= 0 || Date.now() - lastMaintained(stamp) < config.maintainEveryMs) {
        return { ...unchanged, reason: "graph maintenance not due" };
      }
      markMaintained(stamp, log);
      try {
        await client.call(
          "maintain",
          {},
          {
            deadlineMs: config.compactDeadlineMs,
            ...(abortSignal ? { signal: abortSignal } : {}),
          },
        );
        return { ...unchanged, reason: "brain graph maintained; transcript untouched" };
      } catch (error) {
        log.warn(`brain: graph maintenance failed: ${describe(error)}`);
        return { ...unchanged, reason: describe(error) };
      }
    },

    async prepareSubagentSpawn({ parentSessionKey, childSessionKey, parentSessionId, ttlMs }) {
      try {
        await grants.open(childSessionKey, {
          parentSessionKey,
          ...(parentSessionId ? { parentSessionId } : {}),
          ...(ttlMs ? { ttlMs } : {}),
        });
      } catch (error) {
        log.warn(`brain: no grant for sub-agent ${childSessionKey}: ${describe(error)}`);
        return undefined;
      }
      return { rollback: () => grants.close(childSessionKey) };
    },

    async onSubagentEnded({ childSessionKey }) {
      await grants.close(childSessionKey);
    },

    // A short-lived host (`openclaw agent --local`: one process per turn) shuts
    // brain down moments after the commit, before the background compaction
    // the commit made due has waited for the session to go quiet: history
    // would never fold. So the last words wait, within disposeCompactionMs,
    // until brain reports no compaction running or due.
    async dispose() {
      if (disposed) return;
      disposed = true;
      try {
        if (client.pid !== undefined && config.disposeCompactionMs > 0) {
          await settleCompactions(client, config.disposeCompactionMs, config.deadlineMs, log);
        }
      } finally {
        await client.release();
      }
    },
  };
  return engine;
}
