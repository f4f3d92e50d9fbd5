import { render } from "preact";
import { App } from "./app";
import "./styles/base.css";
import "./styles/parts.css";
import "./styles/chat.css";
import "./styles/work.css";

render(<App />, document.getElementById("app")!);
