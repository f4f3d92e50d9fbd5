/**
 * The console's shell: sign-in when the API wants the token, then the views behind one navigation
 * bar (hash routes, so every view is the one page the gateway serves).
 */
import type { ComponentChildren } from "preact";
import { useEffect, useErrorBoundary, useState } from "preact/hooks";
import { ApiError, api, errorText, onUnauthorized } from "./api";
import { navigate, useRoute, withTimeout } from "./hooks";
import type { Operations } from "./types";
import { ChatView } from "./views/chat-view";
import { LoginView } from "./views/login-view";
import { OperationsView } from "./views/operations-view";
import { RunsView } from "./views/runs-view";
import { SessionsView } from "./views/sessions-view";
import { TasksView } from "./views/tasks-view";
import { TeamsView } from "./views/teams-view";
import { UsageView } from "./views/usage-view";

const VIEWS = [
  { path: "chat", title: "Chat" },
  { path: "tasks", title: "Tasks" },
  { path: "teams", title: "Teams" },
  { path: "runs", title: "Runs" },
  { path: "sessions", title: "Sessions" },
  { path: "usage", title: "Usage" },
  { path: "operations", title: "Operations" },
] as const;

type Auth = "checking" | "signed-in" | "signed-out";

export function App() {
  const [auth, setAuth] = useState<Auth>("checking");
  const [unanswered, setUnanswered] = useState<string | undefined>(undefined);
  const route = useRoute();

  useEffect(() => onUnauthorized(() => setAuth("signed-out")), []);
  // Whether the cookie is good: the server's answer says (any answer but a success: sign in). No
  // answer (the server down, or a request it never answers) is asked again every 3 s, and said.
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const check = () =>
      withTimeout((signal) => api<Operations>("/api/operations", { signal })).then(
        () => setAuth("signed-in"),
        (error: unknown) => {
          if (stopped) return;
          if (error instanceof ApiError) return setAuth((current) => (current === "checking" ? "signed-out" : current));
          setUnanswered(errorText(error));
          timer = setTimeout(() => void check(), 3_000);
        },
      );
    void check();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  const [view = "chat", ...rest] = route;
  const known = VIEWS.find((candidate) => candidate.path === view);
  useTitle(auth === "signed-out" ? "Sign in" : (known?.title ?? "Not found"));

  if (auth === "checking") return <p class="loading">{unanswered ? `Loading… the server did not answer (${unanswered}); trying again.` : "Loading…"}</p>;
  if (auth === "signed-out") return <LoginView onSignedIn={() => setAuth("signed-in")} />;

  const signOut = async () => {
    await api("/logout", { method: "POST" }).catch(() => undefined);
    setAuth("signed-out");
  };

  return (
    <>
      <a class="skip-link" href="#main" onClick={(event) => (event.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">CountBot</span>
        <nav aria-label="Views">
          <ul>
            {VIEWS.map((candidate) => (
              <li key={candidate.path}>
                <a href={`#/${candidate.path}`} aria-current={candidate.path === view ? "page" : undefined}>
                  {candidate.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button type="button" class="link-button" onClick={() => void signOut()}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1} data-view={view}>
        <ViewBoundary key={route.join("/")}>
        {view === "chat" && <ChatView chatId={rest[0]} />}
        {view === "tasks" && <TasksView />}
        {view === "usage" && <UsageView />}
        {view === "teams" && <TeamsView id={rest[0]} />}
        {view === "runs" && <RunsView id={rest[0]} teamId={rest[1]} />}
        {view === "sessions" && <SessionsView sessionKey={rest[0]} />}
        {view === "operations" && <OperationsView />}
        {!known && (
          <section>
            <h1>Not found</h1>
            <p>
              There is no view “{view}”. <a href="#/chat" onClick={() => navigate("chat")}>Go to the chat</a>.
            </p>
          </section>
        )}
        </ViewBoundary>
      </main>
    </>
  );
}

function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · CountBot`;
  }, [title]);
}

/** A view that throws shows what broke, not a blank page; the other views (and the navigation) keep working. */
function ViewBoundary(props: { children: ComponentChildren }) {
  const [error, reset] = useErrorBoundary();
  if (error) {
    return (
      <section role="alert">
        <h1>This view failed</h1>
        <p class="field-error">{error instanceof Error ? error.message : String(error)}</p>
        <button type="button" onClick={reset}>
          Try again
        </button>
      </section>
    );
  }
  return <>{props.children}</>;
}
