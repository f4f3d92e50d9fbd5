/**
 * Builds what the model sees for a turn: the system prompt, the history, and the new user content
 * with images as multimodal parts.
 *
 * The system prompt comes in two parts, for the providers' prompt caches. The stable part
 * (identity, tool principles, memory guidance, safety, always-on skills, skill summaries) is the
 * same bytes in every turn of every chat, with no clock and nothing of the chat in it: it is the
 * start of the system message (its length is the message's `stableLength`), and Anthropic gets a
 * cache breakpoint after it. The volatile part follows, after a blank line: this conversation (channel, memory file and what it holds), the
 * group section (the same bytes for every turn of one chat), the memory of the people speaking
 * (changes with who speaks) and, last, the time.
 */
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import type { Media } from "../bus/message.js";
import type { PersonaConfig } from "../config/schema.js";
import { ToolError } from "../errors.js";
import type { ChatMessage, ImageContentPart, TextContentPart, UserContent } from "../providers/chat-model.js";
import type { HistoryEntry } from "../store/store.js";
import type { MemoryStore } from "../memory/memory.js";
import type { PersonMemory } from "../memory/person-memory.js";
import { conversationSection, groupSection, identitySection, memorySection, personMemorySection, safetySection, timeSection, toolPrinciplesSection } from "../prompt/sections.js";
import { type GroupSetting, type Speaker, speakerLabel } from "../prompt/speakers.js";
import { formatSkillsForPrompt, loadSkills } from "./skills.js";

const MAX_IMAGE_BYTES = 10 * 1024 * 1024;
const MAX_MEMORY_CHARS = 8_000;
const SKILLS_CACHE_MS = 5_000;

export interface ContextBuilderOptions {
  workspace: string;
  persona: PersonaConfig;
  memory: MemoryStore;
  /** What people told about themselves; shown for the people speaking in a turn. Absent: no person memory. */
  people?: PersonMemory;
  now?: () => number;
  /** Called with skills that failed to load, so they can be logged. */
  onSkillError?: (error: { path: string; message: string }) => void;
}

/** The system prompt in its two parts: `stable` never changes between turns; `volatile` may. */
export interface SystemPrompt {
  stable: string;
  volatile: string;
}

/** What the system prompt depends on besides the workspace: the session, and who is talking where. */
export interface SystemPromptContext {
  sessionKey: string;
  channel: string;
  /** The multi-person chat the turn comes from; absent in private chats. */
  group?: GroupSetting;
  /** The people speaking in this turn (their person memory is shown); none for background events. */
  speakers?: Speaker[];
}

export class ContextBuilder {
  private skillsCache: { at: number; sections: { alwaysOn: string; summary: string } } | undefined;
  private readonly now: () => number;

  /** Who the assistant is, from the next turn on (a config reload). */
  setPersona(persona: PersonaConfig): void {
    this.options.persona = persona;
  }

  constructor(private readonly options: ContextBuilderOptions) {
    this.now = options.now ?? Date.now;
  }

  /** The whole system prompt as one text: the stable part, then the volatile part. */
  async buildSystemPrompt(context: SystemPromptContext): Promise<string> {
    const { stable, volatile } = await this.buildSystemParts(context);
    return `${stable}\n\n${volatile}`;
  }

  /** The system prompt's stable part (the same for every turn of every chat) and its volatile part. */
  async buildSystemParts(context: SystemPromptContext): Promise<SystemPrompt> {
    const { workspace, persona, memory } = this.options;
    const skills = await this.skillSections();
    const stable = [identitySection(persona, { workspace }), toolPrinciplesSection, memorySection, safetySection];
    if (skills.alwaysOn.trim()) stable.push(`# Active skills\n${skills.alwaysOn.trim()}`);
    if (skills.summary.trim()) {
      stable.push(`# Available skills\nRead a skill's SKILL.md with read_file before using it.\n${skills.summary.trim()}`);
    }
    // The chat's memory and its speakers' are read together (over Redis: one MGET).
    const [chatMemory, people] = await Promise.all([
      // A memory file the wall refuses (a link out of the workspace) must not fail every turn of the chat.
      memory.read(context.sessionKey).catch((error: unknown) => {
        if (error instanceof ToolError) return `[the memory file cannot be read: ${error.message}]`;
        throw error;
      }),
      this.personMemories(context.speakers ?? []),
    ]);
    const memoryText = truncate(chatMemory, MAX_MEMORY_CHARS);
    const volatile = [conversationSection({ channel: context.channel, memoryPath: memory.location(context.sessionKey), memory: memoryText })];
    if (context.group) volatile.push(groupSection(context.group, persona.name));
    if (people) volatile.push(people);
    volatile.push(timeSection(new Date(this.now())));
    return { stable: stable.join("\n\n"), volatile: volatile.join("\n\n") };
  }

  /** The memory of each person speaking in the turn, and nobody else's. */
  private async personMemories(speakers: Speaker[]): Promise<string | undefined> {
    const { people } = this.options;
    if (!people || speakers.length === 0) return undefined;
    const entries = await Promise.all(
      speakers.map(async (speaker) => {
        const key = people.keyOf(speaker.id);
        const memory = await people.store.read(key).catch((error: unknown) => {
          if (error instanceof ToolError) return `[this memory cannot be read: ${error.message}]`;
          throw error;
        });
        return { label: speakerLabel(speaker), location: people.store.location(key), memory: truncate(memory, MAX_MEMORY_CHARS / 2) };
      }),
    );
    return personMemorySection(entries);
  }

  async buildMessages(input: SystemPromptContext & {
    history: HistoryEntry[];
    content: string;
    media?: Media[];
  }): Promise<ChatMessage[]> {
    const system = await this.buildSystemParts(input);
    const history: ChatMessage[] = input.history.map((entry) =>
      entry.role === "assistant" ? { role: "assistant", content: entry.content } : { role: "user", content: entry.content },
    );
    return [
      { role: "system", content: `${system.stable}\n\n${system.volatile}`, stableLength: system.stable.length },
      ...history,
      { role: "user", content: await this.userContent(input.content, input.media ?? []) },
    ];
  }

  /** Text plus images as base64 parts; a file that cannot be read becomes a note, not a failure. */
  async userContent(text: string, media: Media[]): Promise<UserContent> {
    const images = media.filter((item) => item.kind === "image" || item.mimeType?.startsWith("image/"));
    const others = media.filter((item) => !images.includes(item));
    const notes: string[] = others.map((item) => `[attached ${item.kind}: ${item.path}]`);
    const parts: Array<TextContentPart | ImageContentPart> = [];
    for (const image of images) {
      try {
        const info = await stat(image.path);
        if (info.size > MAX_IMAGE_BYTES) {
          notes.push(`[image ${path.basename(image.path)} skipped: ${info.size} bytes is over the ${MAX_IMAGE_BYTES} byte limit]`);
          continue;
        }
        const data = await readFile(image.path);
        parts.push({ type: "image", mediaType: image.mimeType ?? mediaTypeOf(image.path), data: data.toString("base64") });
      } catch {
        notes.push(`[image ${path.basename(image.path)} could not be read]`);
      }
    }
    const fullText = [text, ...notes].filter((line) => line !== "").join("\n");
    if (parts.length === 0) return fullText;
    return [...parts, { type: "text", text: fullText }];
  }

  private async skillSections(): Promise<{ alwaysOn: string; summary: string }> {
    const cached = this.skillsCache;
    if (cached && this.now() - cached.at < SKILLS_CACHE_MS) return cached.sections;
    const { skills, errors } = await loadSkills(this.options.workspace);
    for (const error of errors) this.options.onSkillError?.(error);
    const sections = formatSkillsForPrompt(skills);
    this.skillsCache = { at: this.now(), sections };
    return sections;
  }
}

function mediaTypeOf(file: string): string {
  const extension = path.extname(file).toLowerCase();
  const known: Record<string, string> = { ".png": "image/png", ".gif": "image/gif", ".webp": "image/webp", ".jpg": "image/jpeg", ".jpeg": "image/jpeg" };
  return known[extension] ?? "image/jpeg";
}

function truncate(text: string, limit: number): string {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}\n[memory truncated: ${text.length} characters; search it with the memory tool]`;
}
