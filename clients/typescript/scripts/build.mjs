// Builds the ESM (dist/esm) and CommonJS (dist/cjs) outputs with tsc and places the native
// loader beside them (dist/native), where both outputs import it from.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(join(root, "dist"), { recursive: true, force: true });
for (const project of ["tsconfig.json", "tsconfig.cjs.json"]) {
  execFileSync(process.execPath, [tsc, "-p", join(root, project)], { stdio: "inherit" });
}
writeFileSync(join(root, "dist/esm/package.json"), JSON.stringify({ type: "module" }) + "\n");
writeFileSync(join(root, "dist/cjs/package.json"), JSON.stringify({ type: "commonjs" }) + "\n");
mkdirSync(join(root, "dist/native"), { recursive: true });
for (const f of ["loader.cjs", "loader.d.cts"]) copyFileSync(join(root, "native", f), join(root, "dist/native", f));
console.log("built dist/esm and dist/cjs");
