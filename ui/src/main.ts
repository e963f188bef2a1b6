/**
 * The lmserve web UI: a playground and a live dashboard, served by lmserve itself at `/`. Plain
 * TypeScript and DOM, bundled by Vite; hash routes `#/` (playground) and `#/dashboard`.
 */
import "./style.css";
import "./playground.css";
import "./dashboard.css";
import { apiKey, setApiKey } from "./apiKey.ts";
import { createDashboard } from "./dashboard.ts";
import { h } from "./dom.ts";
import { createPlayground } from "./playground.ts";

const playground = createPlayground();
const dashboard = createDashboard();

const links = {
  playground: h("a", { href: "#/" }, "Playground"),
  dashboard: h("a", { href: "#/dashboard" }, "Dashboard"),
};
const forgetKey = h(
  "button",
  {
    type: "button",
    class: "link",
    hidden: apiKey() === null,
    onclick: () => {
      setApiKey(null);
      forgetKey.hidden = true;
    },
  },
  "Forget API key",
);
window.addEventListener("storage", () => {
  forgetKey.hidden = apiKey() === null;
});

const app = document.getElementById("app")!;
app.replaceChildren(
  h(
    "header",
    { class: "top" },
    h("h1", {}, "lmserve"),
    h("nav", { "aria-label": "Pages" }, links.playground, links.dashboard),
    forgetKey,
  ),
  h("main", {}, playground.element, dashboard.element),
);

/** Shows the page named by the URL hash; the dashboard polls only while it is shown. */
function route(): void {
  const onDashboard = location.hash.startsWith("#/dashboard");
  playground.element.hidden = onDashboard;
  dashboard.element.hidden = !onDashboard;
  for (const [page, link] of Object.entries(links)) {
    if ((page === "dashboard") === onDashboard) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = onDashboard ? "Dashboard · lmserve" : "Playground · lmserve";
  if (onDashboard) dashboard.start();
  else dashboard.stop();
  forgetKey.hidden = apiKey() === null;
}

window.addEventListener("hashchange", route);
route();
void playground.loadModels().then(() => {
  forgetKey.hidden = apiKey() === null;
});
