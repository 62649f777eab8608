// Prints the server configuration Claude Desktop would start for an
// unpacked bundle, computed by the official MCPB library
// (getMcpConfigForManifest: platform_overrides for this OS, then
// ${__dirname} and ${user_config.*} substituted), as a Desktop-style
// {"mcpServers": {...}} document. Used by the bundle test
// (mcp-adapter/e2e/bundle_test.go); handy for checking a bundle by hand.
//
// Usage: node resolve-config.mjs <unpacked-dir>
// The user configuration is read from MCPB_USER_CONFIG (JSON), so a key
// never appears on a command line.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node resolve-config.mjs <unpacked-dir>");
  process.exit(2);
}
const manifest = JSON.parse(await readFile(path.join(dir, "manifest.json"), "utf8"));
const userConfig = JSON.parse(process.env.MCPB_USER_CONFIG ?? "{}");
const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: path.resolve(dir),
  systemDirs: {},
  userConfig,
  pathSeparator: path.sep,
  logger: console,
});
if (!config) {
  console.error("the manifest yields no server configuration (required user_config missing?)");
  process.exit(1);
}
delete config.platform_overrides;
console.log(JSON.stringify({ mcpServers: { [manifest.name]: config } }));
