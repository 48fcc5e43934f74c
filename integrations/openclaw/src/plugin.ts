/**
 * The plugin's registration, apart from the SDK's entry wrapper so tests can
 * drive it with a fake `api`: one brain child for the database, the context
 * engine, and the memory tools.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";

import type { OpenClawPluginApi } from "openclaw/plugin-sdk/plugin-entry";

import { BrainClient } from "./client.js";
import { resolveConfig } from "./config.js";
import { createEngine, ENGINE_ID, type HistoryReader } from "./engine.js";
import { SubagentGrants } from "./grants.js";
import { readHistory as sdkHistory } from "./history.js";
import { createTool, TOOL_DEFINITIONS } from "./tools.js";

type Tool = Parameters<OpenClawPluginApi["registerTool"]>[0];

/** The parts of OpenClaw's plugin API the plugin uses (`config`: OpenClaw's whole config). */
export type PluginApi = Pick<
  OpenClawPluginApi,
  "pluginConfig" | "logger" | "registerContextEngine" | "registerTool"
> &
  Partial<Pick<OpenClawPluginApi, "config">>;

// OpenClaw registers a plugin several times per process: the slot is reported once.
let slotReported = false;

/**
 * The engine OpenClaw's config selects, when it is not brain: with brain loaded but
 * not in the slot (unset means legacy; uninstalling the selected plugin, as some
 * upgrades do, resets it), every turn runs on that engine and brain stores nothing.
 */
export function otherEngine(config: unknown): string | undefined {
  if (typeof config !== "object" || config === null) return undefined; // not told
  const plugins = (config as { plugins?: { slots?: { contextEngine?: unknown } } }).plugins;
  const slot = plugins?.slots?.contextEngine;
  return slot === ENGINE_ID ? undefined : typeof slot === "string" && slot ? slot : "legacy";
}

/** Register the engine and tools on `api` (`readHistory` replaces the SDK's reader in tests). */
export function registerBrain(
  api: PluginApi,
  options: { readHistory?: HistoryReader } = {},
): { client: BrainClient; grants: SubagentGrants } {
  const config = resolveConfig(api.pluginConfig);
  const log = api.logger;
  try {
    mkdirSync(dirname(config.db), { recursive: true });
  } catch (error) {
    log.error(`brain: cannot create the database directory for ${config.db}: ${String(error)}`);
  }
  const client = new BrainClient(
    { command: config.command, args: config.commandArgs, db: config.db },
    log,
  );
  const grants = new SubagentGrants(client, config, log);
  const readHistory = options.readHistory ?? sdkHistory;
  api.registerContextEngine(ENGINE_ID, () =>
    createEngine({ client, config, log, grants, readHistory }),
  );
  for (const definition of TOOL_DEFINITIONS) {
    api.registerTool(
      (ctx) => {
        const scope = {
          ...(ctx.sessionId ? { sessionId: ctx.sessionId } : {}),
          ...(ctx.sessionKey ? { sessionKey: ctx.sessionKey } : {}),
        };
        return createTool(definition, scope, { client, config, grants }) as unknown as Tool &
          ReturnType<Extract<Tool, (...args: never[]) => unknown>>;
      },
      { name: definition.function.name },
    );
  }
  log.info(`brain: context engine "${ENGINE_ID}" over ${config.db} (${config.command})`);
  const other = otherEngine(api.config);
  if (other && !slotReported) {
    slotReported = true;
    log.error(
      `brain: the plugin is loaded but OpenClaw's plugins.slots.contextEngine selects "${other}", ` +
        `not "${ENGINE_ID}": every turn runs on "${other}" and brain stores none of them. ` +
        `Set plugins.slots.contextEngine to "${ENGINE_ID}" (uninstalling or reinstalling the ` +
        "selected plugin resets it to legacy)",
    );
  }
  return { client, grants };
}
