// A real OpenID provider for Studio's sign-in tests: oidc-provider (OpenID
// Certified), on loopback, with its development login and consent pages.
// Any login name signs in as the account of that name; its groups are read
// from GROUPS_FILE (JSON: {"<account>": ["<group>", …]}) at every sign-in,
// so a test changes someone's groups at the provider by rewriting the file.
//
// Environment: PORT (listens on 127.0.0.1:PORT; the issuer is
// http://127.0.0.1:PORT), GROUPS_FILE, REDIRECT_URI (Studio's
// /auth/oidc/callback), CLIENT_ID, CLIENT_SECRET. Prints "ready <issuer>"
// once it listens. It must never listen beyond loopback.

import fs from "node:fs";

import Provider from "oidc-provider";

function env(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`provider.mjs: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

const port = Number(env("PORT"));
const issuer = `http://127.0.0.1:${port}`;
const groupsFile = env("GROUPS_FILE");

function groupsOf(account) {
  const groups = JSON.parse(fs.readFileSync(groupsFile, "utf8"));
  return Array.isArray(groups[account]) ? groups[account] : [];
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: env("CLIENT_ID"),
      client_secret: env("CLIENT_SECRET"),
      redirect_uris: [env("REDIRECT_URI")],
      response_types: ["code"],
      grant_types: ["authorization_code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  // The groups travel in the ID token with the profile scope, as Okta's
  // groups claim or Keycloak's group mapper put them there.
  claims: {
    openid: ["sub"],
    profile: ["preferred_username", "name", "groups"],
    email: ["email", "email_verified"],
  },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["sasha-oidc-test-cookie-key"] },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: id,
          email: `${id}@example.com`,
          email_verified: true,
          groups: groupsOf(id),
        };
      },
    };
  },
});
provider.proxy = false;

provider.listen(port, "127.0.0.1", () => {
  console.log(`ready ${issuer}`);
});
