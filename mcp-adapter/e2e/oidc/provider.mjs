// A certified OpenID provider (panva/oidc-provider) on loopback for the
// adapter's OAuth test (mcp-adapter/e2e/oauth_test.go). It starts two
// independent issuers, "main" and "other", each with its own RSA signing
// key, and prints their issuer URLs as one JSON line. Both issue JWT
// access tokens (RFC 9068) to confidential clients through the
// client-credentials grant, with the audience set to the requested
// resource indicator (RFC 8707).
//
// Clients (secret: CLIENT_SECRET from the environment):
//   kb-reader    scope kb:read, 300 s tokens
//   kb-security  scope kb:read:security, 300 s tokens
//   kb-short     scope kb:read, 3 s tokens (the expiry test)
//   kb-other     scope other:read (none of the adapter's: insufficient_scope)
//   kb-untyped   scope kb:read, tokens typed "JWT" instead of RFC 9068's
//                "at+jwt", as some identity providers issue them
//   kb-hr        scope kb:read, tokens with a groups claim (GROUPS below)
//   kb-legal     scope kb:read, tokens with a groups claim (GROUPS below)
//
// A line "rotate" on stdin rotates main's signing key: a new key signs
// from now on and both keys are published, as a provider does during a
// rotation. It answers "rotated <kid>". Lines meant for the test start
// with "e2e: ". A line "jwks" answers "jwks <n>": how many times main's
// key set has been fetched (the adapter must not refetch it per token).
import { generateKeyPairSync, randomUUID } from "node:crypto";
import http from "node:http";
import readline from "node:readline";
import Provider from "oidc-provider";

const secret = process.env.CLIENT_SECRET;
if (!secret || secret.length < 32) {
  console.error("CLIENT_SECRET (at least 32 characters) is required");
  process.exit(2);
}

// The groups claim of each client's tokens, as an identity provider names
// its groups (the auth service maps them to access groups).
const GROUPS = { "kb-hr": ["HR-Team", "Staff"], "kb-legal": ["legal"] };

function signingKey() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), use: "sig", alg: "RS256" };
}

const client = (id, scope) => ({
  client_id: id,
  client_secret: secret,
  grant_types: ["client_credentials"],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: "client_secret_basic",
  scope,
});

function provider(issuer, keys) {
  const p = new Provider(issuer, {
    clients: [client("kb-reader", "kb:read"), client("kb-security", "kb:read:security"), client("kb-short", "kb:read"), client("kb-other", "other:read"), client("kb-untyped", "kb:read"), client("kb-hr", "kb:read"), client("kb-legal", "kb:read")],
    jwks: { keys },
    scopes: ["openid", "kb:read", "kb:read:security", "other:read"],
    // Each token's lifetime is its resource server's (kb-short: 3 s).
    ttl: { ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 300 },
    formats: {
      customizers: {
        jwt: (_ctx, token, jwt) => {
          if (token.clientId === "kb-untyped") jwt.header = { typ: "JWT" };
          if (GROUPS[token.clientId]) jwt.payload.groups = GROUPS[token.clientId];
        },
      },
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Any absolute resource URL: the test also asks for tokens meant
        // for another resource, which the adapter must refuse.
        getResourceServerInfo: (_ctx, resource, c) => ({
          scope: "kb:read kb:read:security other:read",
          audience: resource,
          accessTokenFormat: "jwt",
          accessTokenTTL: c.clientId === "kb-short" ? 3 : 300,
          jwt: { sign: { alg: "RS256" } },
        }),
      },
    },
  });
  p.on("server_error", (_ctx, err) => console.error("server_error", err));
  return p;
}

// listen serves whichever provider current() returns, so a rotation swaps
// it without closing the listener, and counts the key set's fetches.
async function listen(current, counts) {
  const server = http.createServer((req, res) => {
    if (counts && req.url.split("?")[0] === "/jwks") counts.jwks++;
    current().callback()(req, res);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

let mainKeys = [signingKey()];
let main;
const mainCounts = { jwks: 0 };
const mainServer = await listen(() => main, mainCounts);
const mainIssuer = `http://127.0.0.1:${mainServer.address().port}`;
main = provider(mainIssuer, mainKeys);

let other;
const otherServer = await listen(() => other);
const otherIssuer = `http://127.0.0.1:${otherServer.address().port}`;
other = provider(otherIssuer, [signingKey()]);

// The test reads only lines starting "e2e: " (the provider prints notices
// on stdout too).
const say = (line) => console.log(`e2e: ${line}`);
say(JSON.stringify({ issuer: mainIssuer, other: otherIssuer }));

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (line.trim() === "jwks") {
    say(`jwks ${mainCounts.jwks}`);
    return;
  }
  if (line.trim() !== "rotate") return;
  mainKeys = [signingKey(), ...mainKeys]; // the first key signs
  main = provider(mainIssuer, mainKeys);
  say(`rotated ${mainKeys[0].kid}`);
});
rl.on("close", () => process.exit(0));
