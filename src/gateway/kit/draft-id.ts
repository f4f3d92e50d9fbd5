/**
 * A stable, non-zero 31-bit draft id for a reply id (FNV-1a): the same reply keeps updating the
 * same draft, and the id fits the platform's integer (Telegram's sendMessageDraft).
 */
export function draftIdOf(replyId: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < replyId.length; index++) {
    hash ^= replyId.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 1) || 1;
}
