/** The Operations view's channel table: each platform's state, since when, its last error and next retry, and messages in and out. */
import { StatusBadge, time } from "../format";
import type { ChannelHealth } from "../types";

const explained: Record<ChannelHealth["state"], string> = {
  starting: "connecting",
  up: "connected, delivering",
  degraded: "connected; the platform connection or deliveries are failing and retried",
  down: "could not connect; retried with back-off",
  standby: "another gateway leads this platform; this one takes over if it stops",
};

export function ChannelsCard(props: { channels: ChannelHealth[] }) {
  return (
    <section class="card" aria-labelledby="channels-title">
      <h2 id="channels-title">Channels</h2>
      {props.channels.length === 0 ? (
        <p class="empty">No channel runs in this process.</p>
      ) : (
        <table class="table">
          <caption class="visually-hidden">Each channel's health</caption>
          <thead>
            <tr>
              <th scope="col">Channel</th>
              <th scope="col">State</th>
              <th scope="col">Since</th>
              <th scope="col">In / out</th>
              <th scope="col">Last error</th>
            </tr>
          </thead>
          <tbody>
            {props.channels.map((channel) => (
              <tr key={channel.name} data-channel={channel.name}>
                <th scope="row">{channel.name}</th>
                <td title={explained[channel.state]}>
                  <StatusBadge status={channel.state} />
                </td>
                <td>{time(channel.since)}</td>
                <td>
                  {channel.messagesIn} / {channel.messagesOut}
                </td>
                <td>
                  {channel.lastError ? (
                    <>
                      <span class="hint">{channel.lastError.kind}:</span> {channel.lastError.message} <span class="hint">({time(channel.lastError.at)})</span>
                    </>
                  ) : (
                    "none"
                  )}
                  {channel.retryAt && <span class="hint"> · next try {time(channel.retryAt)}</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
