/**
 * A QQ chat id says where its replies go, so that a reply finds its chat with nothing but the id
 * (a background job's result, another gateway after a failover):
 *
 * - `group:<group_openid>`: a group, `POST /v2/groups/{group_openid}/messages`;
 * - `user:<user_openid>`: a one-to-one (C2C) chat, `POST /v2/users/{openid}/messages`;
 * - `channel:<channel_id>`: a guild channel, `POST /channels/{channel_id}/messages`;
 * - `dms:<guild_id>`: a guild direct message session, `POST /dms/{guild_id}/messages`.
 */
export type ChatKind = "group" | "user" | "channel" | "dms";

export interface ChatRoute {
  kind: ChatKind;
  id: string;
}

const KINDS: readonly ChatKind[] = ["group", "user", "channel", "dms"];

export function chatIdOf(kind: ChatKind, id: string): string {
  return `${kind}:${id}`;
}

export function routeOf(chatId: string): ChatRoute | undefined {
  const colon = chatId.indexOf(":");
  const kind = chatId.slice(0, colon) as ChatKind;
  const id = chatId.slice(colon + 1);
  return colon > 0 && KINDS.includes(kind) && id !== "" ? { kind, id } : undefined;
}

/** The API path a message into the chat is posted to. */
export function messagesPath(route: ChatRoute): string {
  const id = encodeURIComponent(route.id);
  switch (route.kind) {
    case "group":
      return `/v2/groups/${id}/messages`;
    case "user":
      return `/v2/users/${id}/messages`;
    case "channel":
      return `/channels/${id}/messages`;
    case "dms":
      return `/dms/${id}/messages`;
  }
}

/** Groups and C2C chats (the v2 API) count their replies and take `msg_seq`; guild chats do not. */
export const isV2 = (route: ChatRoute): boolean => route.kind === "group" || route.kind === "user";

/** The inbound id the plugin gives a QQ message (`inboundIdOf`): `qq-<msg_id>`, so a reply's `answers` name its msg_id. */
export const INBOUND_PREFIX = "qq-";
