/**
 * A session's history through OpenClaw's transcript API (on 2026.9 the
 * transcript lives in SQLite; there is no file to read).
 */
import type { HistoryReader, TranscriptEntry } from "./engine.js";

// The subpath ships without type declarations; these are the parts used.
interface VisiblePage {
  kind: "page" | "reset" | "missing" | "unavailable";
  cursor?: string;
  entries?: TranscriptEntry[];
  hasMore?: boolean;
  reason?: string;
}
interface TranscriptRuntime {
  readSessionTranscriptVisibleMessageDelta(params: Record<string, unknown>): Promise<VisiblePage>;
  resolveSessionTranscriptIdentity(params: Record<string, unknown>): Promise<{ agentId: string }>;
}

const PAGE = 500;
const SUBPATH = "openclaw/plugin-sdk/session-transcript-runtime";

/** Pages of the visible transcript before the current turn, oldest first. */
export const readHistory: HistoryReader = async function* (target) {
  const runtime = (await import(SUBPATH)) as TranscriptRuntime;
  const scope: Record<string, unknown> = { ...target };
  if (!scope.agentId) {
    scope.agentId = (await runtime.resolveSessionTranscriptIdentity(scope)).agentId;
  }
  let cursor: string | undefined;
  let resets = 0;
  for (;;) {
    const page = await runtime.readSessionTranscriptVisibleMessageDelta({
      ...scope,
      maxMessages: PAGE,
      ...(cursor ? { cursor } : {}),
    });
    if (page.kind === "missing") return;
    if (page.kind === "unavailable") {
      throw new Error(`the transcript is not readable yet (${page.reason ?? "unavailable"})`);
    }
    if (page.kind === "reset") {
      // Replaced while read: start over from the fresh cursor (ids make it idempotent).
      if (++resets > 3) throw new Error("the transcript kept changing while it was read");
      cursor = page.cursor;
      continue;
    }
    yield page.entries ?? [];
    if (!page.hasMore) return;
    cursor = page.cursor;
  }
};
