// The README's examples type-check against the built package (resolved by its own name, as
// an application would import it) and against pg's, Knex's and Drizzle's own types, and
// Prisma's as generated for the example's model. (The same calls run against a real database
// in app-tx.test.mjs.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { prismaProject } from "./prisma-project.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The model the README's Prisma example writes to. */
const README_MODEL = `model OrderSeen {
  inboxId String @id @map("id") @db.Uuid
  total   Int

  @@map("orders_seen")
}`;

test("every README example compiles against the package's types (and the drivers' own types)", async () => {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.equal(examples.length, 7, "the pg quick start, the Knex, Drizzle and Prisma examples, the zero-setup, the typed-payload and the schedules examples");
  for (const e of examples) assert.doesNotMatch(e, /\bas any\b/, "typed payloads need no cast");
  for (const e of examples) assert.ok(e.includes("@alternayte/queuebox-inbox"), "each example imports the package by name");
  assert.match(examples[0], /completeTx\(client, message\)[\s\S]*publish\(client,/, "the quick start shows both directions with pg");
  assert.match(examples[0], /publish\(client,[\s\S]*enqueue\(client,/, "the quick start shows enqueue beside publish");
  assert.match(examples[1], /completeTx\(trx, message\)[\s\S]*publish\(trx,/, "the Knex example shows both directions");
  assert.match(examples[2], /completeTx\(tx, message\)[\s\S]*publish\(tx,/, "the Drizzle example shows both directions");
  assert.match(examples[3], /\$transaction\(async \(tx\)[\s\S]*completeTx\(tx, message\)[\s\S]*publish\(tx,/, "the Prisma example shows both directions");
  // The repository README's TypeScript quick start compiles the same way.
  const top = readFileSync(join(root, "..", "..", "README.md"), "utf8");
  const quick = [...top.matchAll(/<!-- quick start: ts[^>]*-->\n```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.equal(quick.length, 1, "the repository README has one marked TypeScript quick start");
  const dir = join(root, ".readme-check");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  try {
    await prismaProject({ dir, model: README_MODEL }); // the example's generated client
    const files = [...examples, ...quick].map((code, i) => {
      writeFileSync(join(dir, `example${i}.ts`), code);
      return `example${i}.ts`;
    });
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, noEmit: true, types: ["node"], skipLibCheck: true },
        files,
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
