/**
 * `node --import tsx bench/profile-summary.ts <file.cpuprofile>... [--per N]`: where a CPU profile's
 * time went, by self time: grouped by where the code lives (a package under node_modules, a
 * CountBot source file, Node's own internals, the garbage collector, the idle loop), then the top
 * functions. With `--per N` every figure is also given per unit (ms per message for N messages).
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The place a frame's code lives: a package, a source file of ours, or a category of Node's own. */
export function placeOf(frame: ProfileNode["callFrame"]): string {
  const { url, functionName } = frame;
  if (functionName === "(garbage collector)") return "(garbage collector)";
  if (functionName === "(idle)" || functionName === "(program)" || functionName === "(root)") return functionName;
  if (url === "") return "(native)";
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  const ours = /\/(dist\/)?((?:src|channels)\/.+?)(?:\.[jt]s)?$/.exec(url);
  return ours ? ours[2]! : url;
}

export function summarize(profile: Profile): { total: number; byPlace: Map<string, number>; byFunction: Map<string, number> } {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const byPlace = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, index) => {
    const node = nodes.get(id);
    // The first sample's delta is the wait from the profiler's start to its first sample, not work.
    const micros = index === 0 ? 0 : (profile.timeDeltas[index] ?? 0);
    if (!node || node.callFrame.functionName === "(idle)") return;
    total += micros;
    const place = placeOf(node.callFrame);
    byPlace.set(place, (byPlace.get(place) ?? 0) + micros);
    const name = `${node.callFrame.functionName || "(anonymous)"} ${place}:${node.callFrame.lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + micros);
  });
  return { total, byPlace, byFunction };
}

function main(): void {
  const args = process.argv.slice(2);
  const perIndex = args.indexOf("--per");
  const per = perIndex >= 0 ? Number(args[perIndex + 1]) : undefined;
  const files = args.filter((arg, index) => !arg.startsWith("--") && (perIndex < 0 || index !== perIndex + 1));
  for (const file of files) {
    const { total, byPlace, byFunction } = summarize(JSON.parse(readFileSync(file, "utf8")) as Profile);
    const show = (micros: number) => `${(micros / 1000).toFixed(0).padStart(6)} ms ${((micros / total) * 100).toFixed(1).padStart(5)} %${per ? `  ${(micros / 1000 / per).toFixed(4)} ms/unit` : ""}`;
    console.log(`${file}: ${(total / 1000).toFixed(0)} ms busy${per ? `, ${(total / 1000 / per).toFixed(3)} ms per unit` : ""}`);
    for (const [place, micros] of [...byPlace].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.PROFILE_PLACES ?? 18))) console.log(`  ${show(micros)}  ${place}`);
    console.log("  top functions:");
    for (const [name, micros] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.PROFILE_FUNCTIONS ?? 15))) console.log(`  ${show(micros)}  ${name}`);
  }
}

if (process.argv[1]?.endsWith("profile-summary.ts")) main();
