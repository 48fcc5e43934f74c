/**
 * brain's memory tools as OpenClaw agent tools, scoped to the calling session.
 *
 * Names, descriptions and parameter schemas are brain's own (`brain tools
 * --format openai`, committed as brain-tools.json; a test keeps it in step
 * with the installed brain). As in protocol/tools.py, the model never picks
 * the session: the session-scoped tools get the caller's `ctx.sessionId`
 * (a sub-agent's get its parent's session, under its grant), and the graph
 * tools file their traces under it as `chat_id`.
 */
import type { BrainClient } from "./client.js";
import type { BrainPluginConfig } from "./config.js";
import type { SubagentGrants } from "./grants.js";
import definitions from "./brain-tools.json" with { type: "json" };

/** One tool as `brain tools --format openai` prints it. */
export interface ToolDefinition {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** The eight tool definitions. */
export const TOOL_DEFINITIONS = definitions as ToolDefinition[];
/** Their names, as the manifest's contracts.tools lists them. */
export const TOOL_NAMES = TOOL_DEFINITIONS.map((d) => d.function.name);

const SESSION_SCOPED = new Set(["grep", "describe", "expand", "expand_query", "recent"]);
const SCOPE_KEYS = ["session", "all", "session_key", "chat_id"];

/** What a tool knows of its caller (OpenClaw's tool context). */
export interface ToolScope {
  sessionId?: string;
  sessionKey?: string;
}

/** The result OpenClaw hands back to the model. */
export interface ToolResult {
  content: { type: "text"; text: string }[];
  details: unknown;
}

/** An OpenClaw agent tool (the fields the plugin sets). */
export interface BrainTool {
  name: string;
  label: string;
  description: string;
  parameters: Record<string, unknown>;
  execute: (toolCallId: string, params: unknown, signal?: AbortSignal) => Promise<ToolResult>;
}

/**
 * The brain method and params for a model's call of tool `name` from `scope`
 * (the request's `grant` too, for a sub-agent). Whatever scope the model put
 * in its arguments is replaced.
 */
export function toolRequest(
  name: string,
  args: unknown,
  scope: ToolScope,
  grants: SubagentGrants,
): { method: string; params: Record<string, unknown>; grant?: string } {
  const method = name.replace(/^memory_/, "");
  const params: Record<string, unknown> =
    typeof args === "object" && args !== null && !Array.isArray(args) ? { ...args } : {};
  for (const key of SCOPE_KEYS) delete params[key];
  const session = scope.sessionId;
  if (SESSION_SCOPED.has(method)) {
    const grant = grants.get(scope.sessionKey);
    if (grant) {
      if (grant.parentSessionId) params.session = grant.parentSessionId;
      else if (method === "grep" || method === "recent") params.session_key = grant.parentSessionKey;
      else params.session = grant.parentSessionKey;
      if (method === "expand_query") defaultQuery(params);
      return { method, params, grant: grant.grantId };
    }
    if (!session) throw new Error(`${name} needs a session, and this call has none`);
    params.session = session;
    if (method === "expand_query") defaultQuery(params);
  } else if (session) {
    params.chat_id = session;
  }
  return { method, params };
}

function defaultQuery(params: Record<string, unknown>): void {
  const ids = params.summary_ids;
  const hasIds = Array.isArray(ids) && ids.length > 0;
  if (!hasIds && !params.query && typeof params.prompt === "string") {
    params.query = params.prompt.slice(0, 4096);
  }
}

/** The tool `definition` for the session in `scope`. */
export function createTool(
  definition: ToolDefinition,
  scope: ToolScope,
  deps: { client: BrainClient; config: BrainPluginConfig; grants: SubagentGrants },
): BrainTool {
  const { name, description, parameters } = definition.function;
  return {
    name,
    label: name.replace(/^memory_/, "memory: ").replace(/_/g, " "),
    description,
    parameters,
    async execute(_toolCallId, args, signal) {
      const { method, params, grant } = toolRequest(name, args, scope, deps.grants);
      // teach and learn write; sending them twice would teach twice.
      const idempotent = method !== "teach" && method !== "learn";
      deps.client.acquire();
      try {
        const result = await deps.client.call(method, params, {
          deadlineMs: deps.config.toolDeadlineMs,
          idempotent,
          ...(grant ? { grant } : {}),
          ...(signal ? { signal } : {}),
        });
        return { content: [{ type: "text", text: JSON.stringify(result) }], details: result };
      } finally {
        await deps.client.release();
      }
    },
  };
}
