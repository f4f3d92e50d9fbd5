/** `npm run bench`: every benchmark, figures as ratios measured in one run. */
import { benchAgentLoop } from "./agent-loop.js";

await benchAgentLoop();
