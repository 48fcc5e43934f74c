/**
 * brain for OpenClaw: the plugin entry. Select it with
 * `plugins.slots.contextEngine: "brain"`; see the README's OpenClaw section.
 */
import { readFileSync } from "node:fs";

import {
  buildJsonPluginConfigSchema,
  definePluginEntry,
} from "openclaw/plugin-sdk/plugin-entry";

import { registerBrain } from "./plugin.js";

const manifest = JSON.parse(
  readFileSync(new URL("../openclaw.plugin.json", import.meta.url), "utf8"),
) as { id: string; name: string; description: string; configSchema: Record<string, unknown> };

export default definePluginEntry({
  id: manifest.id,
  name: manifest.name,
  description: manifest.description,
  configSchema: buildJsonPluginConfigSchema(
    manifest.configSchema as Parameters<typeof buildJsonPluginConfigSchema>[0],
  ),
  register(api) {
    registerBrain(api);
  },
});
