/** Every team mode by name: adding a mode is a file and a line here (and the name in the team schema). */
import type { TeamRecord } from "../../../store/team-record.js";
import { councilMode } from "./council.js";
import { graphMode } from "./graph.js";
import { pipelineMode } from "./pipeline.js";
import type { TeamMode } from "./team-mode.js";

export const teamModes: Readonly<Record<TeamRecord["mode"], TeamMode>> = { pipeline: pipelineMode, graph: graphMode, council: councilMode };

export { REVIEW_SUFFIX, SYNTHESIS_NODE } from "./council.js";
export type { NodePlan, TeamMode, TeamShape } from "./team-mode.js";
