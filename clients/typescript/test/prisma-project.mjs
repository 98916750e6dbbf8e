// Test support: a real Prisma project made on the fly, as an application has one: a schema
// with one model on the test's `orders_seen` table, `prisma generate` run by the `prisma`
// CLI of this package's dev dependencies, and the generated client on the node-postgres
// driver adapter (@prisma/adapter-pg; Prisma 7 runs queries through its query compiler, with
// no engine binary).
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The tests' table `orders_seen (inbox_id uuid PRIMARY KEY, note text NOT NULL)`. */
export const ORDERS_SEEN = `model OrderSeen {
  inboxId String @id @map("inbox_id") @db.Uuid
  note    String

  @@map("orders_seen")
}`;

/**
 * Writes a Prisma project with `model` into `dir` (default: a new temporary directory whose
 * node_modules is a link to this package's), generates its client into `generated/prisma`
 * and returns `{ dir, PrismaClient, PrismaPg, remove }`.
 */
export async function prismaProject({ dir, model = ORDERS_SEEN } = {}) {
  if (dir === undefined) {
    dir = mkdtempSync(join(tmpdir(), "qb-prisma-"));
    symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir");
  }
  mkdirSync(join(dir, "prisma"));
  writeFileSync(
    join(dir, "prisma", "schema.prisma"),
    `generator client {\n  provider = "prisma-client-js"\n  output   = "../generated/prisma"\n}\n\ndatasource db {\n  provider = "postgresql"\n}\n\n${model}\n`,
  );
  // `prisma generate` never runs the schema engine (it reads the schema with the WASM build
  // the prisma package ships), but the CLI first downloads that engine from Prisma's own
  // CDN, which the machines this runs on cannot reach. Naming an engine skips the download;
  // this one only says why it is there, should anything ever run it.
  const engine = join(dir, "schema-engine");
  writeFileSync(engine, "#!/bin/sh\necho 'no schema engine in this test project: prisma migrate and db push are not used' >&2\nexit 1\n");
  chmodSync(engine, 0o755);
  const cli = createRequire(import.meta.url).resolve("prisma/build/index.js");
  try {
    execFileSync(process.execPath, [cli, "generate", "--schema", join(dir, "prisma", "schema.prisma")], {
      cwd: dir,
      stdio: "pipe",
      env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: engine, CHECKPOINT_DISABLE: "1", PRISMA_HIDE_UPDATE_MESSAGE: "1" },
    });
  } catch (e) {
    throw new Error(`prisma generate failed:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
  }
  const { PrismaClient } = createRequire(join(dir, "package.json"))("./generated/prisma/index.js");
  const { PrismaPg } = await import("@prisma/adapter-pg");
  return { dir, PrismaClient, PrismaPg, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
