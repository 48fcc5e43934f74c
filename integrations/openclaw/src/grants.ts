/**
 * Sub-agent grants: a child session may read its parent's conversation in
 * brain, and nothing else, through a brain `grant` opened in
 * `prepareSubagentSpawn` and revoked when the spawn is rolled back or the
 * child ends. The child's memory tools then search the parent's session
 * under the grant.
 */
import type { BrainClient, Logger } from "./client.js";
import type { BrainPluginConfig } from "./config.js";

/** The grant a child session's tools run under. */
export interface ChildGrant {
  grantId: string;
  /** The brain session (OpenClaw session id) or session key the grant covers. */
  parentSessionId?: string;
  parentSessionKey: string;
}

/** Read-only methods: a sub-agent may look things up, never write. */
export const GRANTED_METHODS = ["grep", "describe", "expand", "expand_query"];
const MAX_TTL_S = 30 * 24 * 3600;

/** The grants of this process's sub-agents, by child session key. */
export class SubagentGrants {
  private readonly client: BrainClient;
  private readonly config: BrainPluginConfig;
  private readonly log: Logger;
  private readonly byChild = new Map<string, ChildGrant>();

  constructor(client: BrainClient, config: BrainPluginConfig, log: Logger) {
    this.client = client;
    this.config = config;
    this.log = log;
  }

  /** The grant of `childSessionKey`, if it has one. */
  get(childSessionKey: string | undefined): ChildGrant | undefined {
    return childSessionKey ? this.byChild.get(childSessionKey) : undefined;
  }

  /** Open a grant over the parent's session for the child. */
  async open(
    childSessionKey: string,
    parent: { parentSessionKey: string; parentSessionId?: string; ttlMs?: number },
  ): Promise<ChildGrant> {
    const ttl = parent.ttlMs ? Math.ceil(parent.ttlMs / 1000) : 3600;
    const params: Record<string, unknown> = {
      methods: GRANTED_METHODS,
      token_cap: this.config.subagentTokenCap,
      ttl_s: Math.min(MAX_TTL_S, Math.max(1, ttl)),
    };
    // The parent's own session when known, else every session filed under its key.
    if (parent.parentSessionId) params.sessions = [parent.parentSessionId];
    else params.session_key = parent.parentSessionKey;
    this.client.acquire();
    try {
      const result = await this.client.call<{ grant_id: string }>("grant", params, {
        deadlineMs: this.config.deadlineMs,
      });
      const grant: ChildGrant = {
        grantId: result.grant_id,
        parentSessionKey: parent.parentSessionKey,
        ...(parent.parentSessionId ? { parentSessionId: parent.parentSessionId } : {}),
      };
      this.byChild.set(childSessionKey, grant);
      return grant;
    } finally {
      await this.client.release();
    }
  }

  /** Revoke the child's grant (a no-op when it has none). */
  async close(childSessionKey: string): Promise<void> {
    const grant = this.byChild.get(childSessionKey);
    if (!grant) return;
    this.byChild.delete(childSessionKey);
    this.client.acquire();
    try {
      await this.client.call(
        "revoke",
        { grant_id: grant.grantId },
        { deadlineMs: this.config.deadlineMs, idempotent: true },
      );
    } catch (error) {
      // It expires on its own at its ttl; say so rather than fail the host's cleanup.
      this.log.warn(`brain: could not revoke ${grant.grantId}: ${String(error)}`);
    } finally {
      await this.client.release();
    }
  }
}
