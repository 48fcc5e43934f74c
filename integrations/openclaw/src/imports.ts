/**
 * The cursor of a bootstrap import that has not finished yet, persisted beside
 * the database (one small file per session under `<db>.openclaw-import/`).
 *
 * `openclaw agent --local` is a new process every turn and a bootstrap is
 * bounded by the deadline, so a long legacy history may take several turns to
 * import. The file exists from before the first message is sent until the
 * last one is stored: while it exists brain's copy of the session is
 * incomplete (the next bootstrap resumes after `last`, the newest entry
 * stored), and once it is gone the session is brain's.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** An import in progress: the newest transcript entry stored so far (null: none yet). */
export interface PendingImport {
  session: string;
  last: string | null;
}

function path(db: string, session: string): string {
  // Hashed: session ids are the host's and may hold any character.
  const name = createHash("sha256").update(session).digest("hex").slice(0, 32);
  return join(`${db}.openclaw-import`, `${name}.json`);
}

/** The session's unfinished import, if any. */
export function pendingImport(db: string, session: string): PendingImport | undefined {
  let raw: string;
  try {
    raw = readFileSync(path(db, session), "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(raw) as Partial<PendingImport>;
    return { session, last: typeof parsed.last === "string" ? parsed.last : null };
  } catch {
    // A torn file still says an import is unfinished; resuming from the start
    // is safe (entry ids make what is stored already a duplicate).
    return { session, last: null };
  }
}

/** Record that the session's import has stored everything up to entry `last`. */
export function markImport(db: string, session: string, last: string | null): void {
  const file = path(db, session);
  mkdirSync(join(file, ".."), { recursive: true });
  // Written aside and renamed: a reader never sees half a cursor.
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify({ session, last } satisfies PendingImport));
  renameSync(tmp, file);
}

/** The session's import is complete. */
export function finishImport(db: string, session: string): void {
  rmSync(path(db, session), { force: true });
}
