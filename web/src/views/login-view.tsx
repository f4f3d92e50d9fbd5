/**
 * Sign-in with the API token: posted as JSON to `/login`, which answers with the HttpOnly cookie
 * the API and the WebSocket take. The token is never kept by the page itself.
 */
import { useState } from "preact/hooks";
import { api, errorText } from "../api";

export function LoginView(props: { onSignedIn: () => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await api("/login", { method: "POST", body: { token: token.trim() } });
      // With no token configured the login sets nothing: whether the API answers now is the test.
      await api("/api/operations");
      setToken("");
      props.onSignedIn();
    } catch (caught) {
      setError(errorText(caught).replace(/^token: /, ""));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" class="login">
      <form class="card" onSubmit={(event) => void submit(event)} aria-labelledby="login-title">
        <h1 id="login-title">Sign in to CountBot</h1>
        <p class="hint">
          The API token is in <code>&lt;dataDir&gt;/api-token</code> (or <code>COUNTBOT_API_TOKEN</code>); <code>countbot start</code> prints a login link with it.
        </p>
        <label for="login-token">API token</label>
        <input
          id="login-token"
          name="token"
          type="password"
          autoComplete="current-password"
          required
          value={token}
          onInput={(event) => setToken(event.currentTarget.value)}
          aria-invalid={error ? "true" : undefined}
          aria-describedby={error ? "login-error" : undefined}
          autoFocus
        />
        {error && (
          <p id="login-error" class="field-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy || token.trim() === ""}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
