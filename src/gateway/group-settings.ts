/**
 * The group settings every chat platform's section takes (`channels.<name>.groupContext` and
 * `channels.<name>.teamProgress`): how a multi-person chat reaches the model, and how a team run
 * started there shows its progress. One schema, spread into each platform's config, so the names,
 * defaults and descriptions are the same everywhere.
 */
import { z } from "zod";

export const GroupContextSettingSchema = z
  .enum(["labelled", "off"])
  .default("labelled")
  .describe(
    "In groups, guild channels and threads: `labelled` gives every message to the model with its speaker's display name and id (`[Alice (discord:123)] …`, built from the platform's fields, never from the text) and tells it it is in a group; `off` passes the text alone, as in a private chat.",
  );
export type GroupContextSetting = z.infer<typeof GroupContextSettingSchema>;

export const TeamProgressSettingSchema = z
  .enum(["status-message", "off"])
  .default("status-message")
  .describe(
    "A team run started in this chat: `status-message` posts one message, threaded to the message that started it, and edits it in place as each agent waits, runs, finishes or fails (at the platform's edit pace); `off` shows nothing until the result.",
  );
export type TeamProgressSetting = z.infer<typeof TeamProgressSettingSchema>;

/** The shape to spread into a platform's `z.strictObject({...})`. */
export const groupSettingsShape = {
  groupContext: GroupContextSettingSchema,
  teamProgress: TeamProgressSettingSchema,
};
