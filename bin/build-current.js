// Whether a checkout's build in dist/ is current: built (dist/build-stamp.json written) after the
// last change to any source file under src/ and channels/. bin/countbot.js runs the build then,
// else the sources through tsx. Plain JavaScript: it runs before anything can be compiled.
import { readdirSync, statSync } from "node:fs";
import path from "node:path";

/** @param {string} root the package's directory */
export function buildIsCurrent(root) {
  let builtAt;
  try {
    builtAt = statSync(path.join(root, "dist", "build-stamp.json")).mtimeMs;
  } catch {
    return false;
  }
  for (const directory of ["src", "channels"]) {
    for (const entry of readdirSync(path.join(root, directory), { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && statSync(path.join(entry.parentPath ?? entry.path, entry.name)).mtimeMs > builtAt) return false;
    }
  }
  return true;
}
