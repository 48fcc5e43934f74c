/** The built package as OpenClaw loads it: manifest, package.json and the SDK entry. */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { brainCommand, needsBrain } from "./helpers.ts";

const read = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8"));

test("package.json points OpenClaw at the built entry, and the entry is definePluginEntry's", async () => {
  const pkg = read("../package.json");
  assert.deepEqual(pkg.openclaw.extensions, ["./dist/index.js"]);
  const entry = (await import(new URL(pkg.openclaw.extensions[0], new URL("../", import.meta.url)).href)).default;
  const manifest = read("../openclaw.plugin.json");
  assert.equal(entry.id, manifest.id);
  assert.equal(typeof entry.register, "function");
  // The entry validates config with the manifest's schema: a typo is refused.
  assert.equal(entry.configSchema.safeParse({ db: "/tmp/x.db" }).success, true);
  assert.equal(entry.configSchema.safeParse({ dbb: "/tmp/x.db" }).success, false);
  const engines: string[] = [];
  const tools: string[] = [];
  entry.register({
    pluginConfig: { command: "/nonexistent/brain", db: "/tmp/brain-oc-entry/brain.db" },
    logger: { info() {}, warn() {}, error() {} },
    registerContextEngine: (id: string) => engines.push(id),
    registerTool: (_factory: unknown, opts: { name: string }) => tools.push(opts.name),
  });
  assert.deepEqual(engines, ["brain"]);
  assert.deepEqual(tools, manifest.contracts.tools);
});

test("the committed tool definitions are what the installed brain prints", { skip: needsBrain }, () => {
  const printed = JSON.parse(execFileSync(brainCommand()!, ["tools", "--format", "openai"], { encoding: "utf8" }));
  assert.deepEqual(read("../src/brain-tools.json"), printed);
});
