// The README's example type-checks against the built package (resolved by its own name,
// as an application would import it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

test("the README example compiles against the package's types", () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(example && example.includes("@alternayte/queuebox-inbox"), "README has a TypeScript example");
  const dir = join(root, ".readme-check");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  try {
    writeFileSync(join(dir, "example.ts"), example);
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true, types: ["node"], skipLibCheck: true },
        files: ["example.ts"],
      }),
    );
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    execFileSync(process.execPath, [tsc, "-p", join(dir, "tsconfig.json")], { stdio: "pipe" });
  } catch (e) {
    assert.fail(`README example does not compile:\n${e.stdout ?? ""}${e.stderr ?? ""}${e.stdout ? "" : e}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
