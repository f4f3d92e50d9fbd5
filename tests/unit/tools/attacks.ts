/**
 * The attack corpus of the tool tests. Every attack is a test titled `attack: ...` that asserts
 * the refusal AND that nothing happened, so the README's tally ("attacks tried, attacks stopped")
 * is the number of such tests and how many pass:
 *   npx vitest list tests/unit/tools | grep -c "attack: "
 */
import { it } from "vitest";

/** One attack: it must be refused and leave no trace. */
export function attack(title: string, run: () => Promise<void>): void {
  it(`attack: ${title}`, run);
}

/** A legitimate use next to the attacks, so the walls are shown not to refuse everything. */
export function allowed(title: string, run: () => Promise<void>): void {
  it(`allowed: ${title}`, run);
}
