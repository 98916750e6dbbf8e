// Typed payloads at the type level: test/types/payload.ts compiles against the built
// package's declarations (resolved by its own name, as an application imports it), and its
// `@ts-expect-error` lines are errors. The runtime side (validate) is in validate.test.mjs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

test("typed payloads: Worker<T>, InboxMessage<T> and validate type-check as documented", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const args = [
    tsc, "--noEmit", "--strict", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--target", "ES2022",
    "--types", "node", "--skipLibCheck", join(root, "test", "types", "payload.ts"),
  ];
  try {
    execFileSync(process.execPath, args, { stdio: "pipe", cwd: root });
  } catch (e) {
    assert.fail(`test/types/payload.ts does not type-check:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
});
