/** The assistant's identity: its name, how it addresses people, a personality preset. */
import { z } from "zod";

export const personalityPresets = ["professional", "friendly", "concise", "playful", "mentor"] as const;

export const PersonaSchema = z
  .strictObject({
    name: z.string().min(1).default("CountBot").describe("The assistant's name, used in its identity prompt."),
    userName: z.string().optional().describe("How the assistant addresses the user."),
    personality: z.enum(personalityPresets).default("professional").describe("A personality preset."),
    customPrompt: z.string().optional().describe("Extra text appended to the identity section."),
  })
  .prefault({});
