// End-to-end check of the MCP adapter from outside Go: the official MCP
// TypeScript SDK client starts the adapter binary over stdio exactly as
// Claude Desktop would from a claude_desktop_config.json, lists its tools,
// calls each of them and reads a resource. The SDK validates every
// structuredContent against the tool's outputSchema (for errors too) once
// the tools have been listed, so a schema mismatch fails the call.
//
// Environment: DESKTOP_CONFIG, the Desktop configuration JSON (as
// deploy/local/desktop-config.sh prints it); its bmcis-knowledge server's
// command and env are used unchanged (the SDK adds only HOME, PATH and the
// like, as Desktop does). Run by mcp-adapter/e2e (go test) against the
// real services with the demo data; prints "N passed, M failed" last.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

if (!process.env.DESKTOP_CONFIG) {
  console.error("DESKTOP_CONFIG is not set");
  process.exit(2);
}
const server = JSON.parse(process.env.DESKTOP_CONFIG).mcpServers["bmcis-knowledge"];

let passed = 0;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (err) {
    failed++;
    console.log(`FAIL ${name}\n     ${String(err?.stack ?? err).split("\n").join("\n     ")}`);
  }
}

// connect starts the adapter and an SDK client; elicit, when given, answers
// elicitation requests (the client then declares the capability).
async function connect(elicit) {
  const capabilities = elicit ? { elicitation: {} } : {};
  const client = new Client({ name: "bmcis-e2e", version: "1.0.0" }, { capabilities });
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, elicit);
  }
  const transport = new StdioClientTransport({ command: server.command, args: server.args ?? [], env: server.env, stderr: "pipe" });
  let stderr = "";
  transport.stderr?.on("data", (d) => { stderr += d; });
  await client.connect(transport);
  client.adapterLog = () => stderr;
  return client;
}

// envelope returns the structured envelope and checks that the JSON text
// block, when there is one, carries the same object.
function envelope(result) {
  const env = result.structuredContent;
  assert.ok(env && typeof env === "object", "structuredContent is the envelope");
  // resource_link blocks (kb://chunks/{id}) follow the text blocks.
  const texts = result.content.filter((c) => c.type === "text");
  assert.deepEqual(result.content.slice(0, texts.length), texts, "text blocks first");
  const last = texts.at(-1);
  if (last.text.startsWith("{")) {
    assert.deepEqual(JSON.parse(last.text), env, "the JSON block is the envelope");
  }
  assert.equal(result.isError === true, env._metadata.status === "error", "isError matches status error");
  assert.equal(env._metadata.version, "1.0.0");
  assert.match(env._metadata.request_id, /^req_[0-9a-f]+$/);
  assert.equal(env.execution_context.request_id, env._metadata.request_id);
  assert.ok(env.execution_context.tokens_used > 0);
  return env;
}

const client = await connect();
const call = async (name, args) => envelope(await client.callTool({ name, arguments: args }));

try {
  await check("initialize names the server", async () => {
    assert.equal(client.getServerVersion()?.name, "bmcis-knowledge");
    assert.equal(client.getServerVersion()?.title, "BMCIS Knowledge");
    assert.match(client.getServerVersion()?.icons?.[0]?.src ?? "", /^data:image\/svg\+xml;base64,/);
    assert.ok(client.getServerCapabilities()?.prompts, "prompts capability");
    assert.ok(client.getServerCapabilities()?.completions, "completions capability");
    assert.ok(client.getServerCapabilities()?.tools, "tools capability");
    assert.ok(client.getInstructions()?.includes("semantic_search"));
  });

  await check("tools/list: three read-only tools with output schemas", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["find_vendor_info", "get_chunks", "semantic_search"]);
    for (const t of tools) {
      assert.equal(t.annotations?.readOnlyHint, true, t.name);
      assert.equal(t.annotations?.destructiveHint, false, t.name);
      assert.equal(t.annotations?.idempotentHint, true, t.name);
      assert.equal(t.outputSchema?.type, "object", t.name);
      assert.ok(t.title, t.name);
      assert.equal(t.icons?.[0]?.mimeType, "image/svg+xml", t.name);
      assert.ok(t.description.startsWith("Use this "), t.name);
    }
  });

  await check("resources/templates/list: kb:// templates", async () => {
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((r) => r.uriTemplate).sort(), ["kb://chunks/{chunk_id}", "kb://vendors/{vendor_name}"]);
  });

  let ids = [];
  await check("semantic_search in every mode", async () => {
    const fields = {
      ids_only: ["chunk_id", "hybrid_score", "rank"],
      // deduplication only on results with near duplicates
      metadata: ["chunk_id", "chunk_index", "confidence", "hybrid_score", "rank", "ranking", "source_category", "source_file", "total_chunks"],
    };
    for (const mode of ["ids_only", "metadata", "preview", "full"]) {
      const env = await call("semantic_search", { query: "suspected security incident evidence", response_mode: mode, page_size: 5 });
      assert.equal(env._metadata.status, "success", mode);
      assert.equal(env.results.length, 5, mode);
      assert.equal(env.pagination.page_size, 5);
      assert.equal(env.pagination.has_more, true);
      assert.deepEqual(env.results.map((r) => r.rank), [1, 2, 3, 4, 5]);
      // deduplication and mentions are there only when the result has some
      if (fields[mode]) assert.deepEqual(Object.keys(env.results[0]).filter((k) => k !== "deduplication" && k !== "mentions").sort(), fields[mode], mode);
      if (mode === "preview") assert.ok(env.results[0].chunk_snippet.length <= 203);
      if (mode === "full") assert.ok(env.results[0].chunk_text.length > 200 && env.results[0].chunk_token_count > 0);
      if (mode === "ids_only") ids = env.results.map((r) => r.chunk_id);
    }
    assert.equal(ids.length, 5);
  });

  await check("semantic_search links its top results as resource_link blocks", async () => {
    const res = await client.callTool({ name: "semantic_search", arguments: { query: "suspected security incident evidence", response_mode: "ids_only", page_size: 5 } });
    const env = envelope(res);
    const links = res.content.filter((c) => c.type === "resource_link");
    assert.deepEqual(links.map((l) => l.uri), env.results.slice(0, 3).map((r) => `kb://chunks/${r.chunk_id}`));
    for (const l of links) {
      assert.equal(l.name, l.uri.replace("kb://chunks/", "chunk "));
      assert.ok(!("description" in l) && !("mimeType" in l), "no empty optional members");
    }
    const opened = await client.readResource({ uri: links[0].uri });
    assert.equal(JSON.parse(opened.contents.at(-1).text).results[0].chunk_id, env.results[0].chunk_id);
    const full = await client.callTool({ name: "semantic_search", arguments: { query: "suspected security incident evidence", response_mode: "full", page_size: 2 } });
    assert.equal(full.content.filter((c) => c.type === "resource_link").length, 0, "full results carry their text");
  });

  await check("prompts: research a vendor, find and cite", async () => {
    const { prompts } = await client.listPrompts();
    assert.deepEqual(prompts.map((p) => p.name).sort(), ["find_and_cite", "research_vendor"]);
    for (const p of prompts) assert.ok(p.title && p.arguments[0].required, p.name);
    const got = await client.getPrompt({ name: "research_vendor", arguments: { vendor_name: "Globex" } });
    assert.equal(got.messages[0].role, "user");
    assert.match(got.messages[0].content.text, /find_vendor_info with vendor_name "Globex"/);
    const cite = await client.getPrompt({ name: "find_and_cite", arguments: { question: "How do we rotate keys?" } });
    assert.match(cite.messages[0].content.text, /kb:\/\/chunks\//);
  });

  await check("completion/complete: vendor_name from the graph (prompt and template)", async () => {
    for (const ref of [{ type: "ref/prompt", name: "research_vendor" }, { type: "ref/resource", uri: "kb://vendors/{vendor_name}" }]) {
      const { completion } = await client.complete({ ref, argument: { name: "vendor_name", value: "acm" } });
      for (const want of ["ACME Inc", "Acme Corp", "Acme Ltd"]) assert.ok(completion.values.includes(want), `${ref.type}: ${want} in ${completion.values}`);
    }
  });

  await check("semantic_search pages with the cursor", async () => {
    const first = await call("semantic_search", { query: "vendor security questionnaire", response_mode: "ids_only", page_size: 3 });
    const next = await call("semantic_search", { query: "vendor security questionnaire", cursor: first.pagination.cursor });
    assert.deepEqual(next.results.map((r) => r.rank), [4, 5, 6]);
    assert.ok(!first.results.some((a) => next.results.some((b) => a.chunk_id === b.chunk_id)));
  });

  await check("semantic_search markdown and both formats", async () => {
    const md = await client.callTool({ name: "semantic_search", arguments: { query: "mfa rollout", format: "markdown", page_size: 2 } });
    const texts = (r) => r.content.filter((c) => c.type === "text");
    assert.equal(texts(md).length, 1);
    assert.equal(md.content.length, 3, "and 2 resource links");
    assert.ok(md.content[0].text.startsWith("## "));
    envelope(md);
    const both = await client.callTool({ name: "semantic_search", arguments: { query: "mfa rollout", format: "both", page_size: 2 } });
    assert.equal(texts(both).length, 2);
    envelope(both);
  });

  await check("get_chunks reads the chunks in full, in the order asked", async () => {
    const env = await call("get_chunks", { chunk_ids: [ids[1], ids[0]] });
    assert.equal(env._metadata.status, "success");
    assert.deepEqual(env.results.map((r) => r.chunk_id), [ids[1], ids[0]]);
    assert.ok(env.results[0].chunk_text.length > 0);
    assert.equal(env.pagination, null);
  });

  await check("find_vendor_info in every mode", async () => {
    for (const mode of ["ids_only", "metadata", "preview", "full"]) {
      const env = await call("find_vendor_info", { vendor_name: "Globex", response_mode: mode });
      assert.equal(env._metadata.status, "success", mode);
      assert.equal(env.results[0].vendor_name, "Globex Corporation");
    }
  });

  await check("mentions and vendor evidence validate", async () => {
    const s = await call("semantic_search", { query: "Acme Corp our payroll and HR software provider", response_mode: "metadata", page_size: 5 });
    assert.ok(s.results.some((r) => (r.mentions || []).some((m) => m.name === "Acme Corp" && m.type === "COMPANY" && m.entity_id)));
    assert.deepEqual(s.query_analysis.vendors, ["Acme Corp"]);
    const evidence = { ids_only: "evidence_chunk_ids", metadata: "evidence_documents", preview: "evidence", full: "evidence" };
    for (const mode of ["ids_only", "metadata", "preview", "full"]) {
      const env = await call("find_vendor_info", { vendor_name: "Acme Corp", response_mode: mode });
      assert.equal(env._metadata.status, "success", mode);
      assert.ok(env.results[0][evidence[mode]].length > 0, mode);
    }
  });

  await check("errors are envelopes that validate: ambiguous vendor, long query, bad cursor", async () => {
    let env = await call("find_vendor_info", { vendor_name: "Acme" });
    assert.equal(env.error.code, "VENDOR_AMBIGUOUS");
    assert.equal(env.needs_input.kind, "needsInput:v1");
    assert.deepEqual(env.needs_input.needsInput.suggestions.vendor_name.slice().sort(), ["ACME Inc", "Acme Corp", "Acme Ltd"]);
    env = await call("semantic_search", { query: "x".repeat(501) });
    assert.equal(env.error.code, "QUERY_TOO_LONG");
    env = await call("semantic_search", { query: "backups", cursor: "forged.cursor" });
    assert.equal(env.error.code, "INVALID_CURSOR");
    env = await call("get_chunks", { chunk_ids: [ids[0]], response_mode: "ids_only", fields: ["chunk_text"] });
    assert.equal(env.error.code, "INVALID_FIELDS");
  });

  await check("resources/read kb://chunks/{id} and kb://vendors/{name}", async () => {
    let res = await client.readResource({ uri: `kb://chunks/${ids[0]}` });
    assert.equal(res.contents.length, 2);
    assert.equal(res.contents[0].mimeType, "text/markdown");
    assert.equal(res.contents[1].mimeType, "application/json");
    assert.equal(JSON.parse(res.contents[1].text).results[0].chunk_id, ids[0]);
    res = await client.readResource({ uri: "kb://vendors/Hooli" });
    assert.equal(JSON.parse(res.contents.at(-1).text).results[0].vendor_name, "Hooli");
  });
} finally {
  await client.close();
}

// A client that declares elicitation: the adapter asks which Acme is meant
// and continues with the answer.
const asked = [];
const eclient = await connect(async (req) => {
  asked.push(req.params);
  return { action: "accept", content: { vendor_name: "Acme Corp" } };
});
try {
  await check("elicitation: an ambiguous vendor is resolved by asking the user", async () => {
    const res = await eclient.listTools();
    assert.equal(res.tools.length, 3);
    const env = envelope(await eclient.callTool({ name: "find_vendor_info", arguments: { vendor_name: "Acme" } }));
    assert.equal(asked.length, 1, "asked once");
    assert.deepEqual(asked[0].requestedSchema.properties.vendor_name.enum.slice().sort(), ["ACME Inc", "Acme Corp", "Acme Ltd"]);
    assert.equal(env._metadata.status, "success");
    assert.equal(env.results[0].vendor_name, "Acme Corp");
    assert.ok(env.warnings.some((w) => w.code === "RESOLVED_BY_ELICITATION"));
  });
} finally {
  await eclient.close();
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
