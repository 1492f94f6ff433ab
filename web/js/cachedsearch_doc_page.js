// A node's help page (web/docs/<node>.md) shown in a new tab as a page a browser displays: the server sends .md
// files as application/octet-stream, so a plain link downloads them and the tab closes. The page is fetched and
// drawn here from the subset of Markdown the docs use (headings, paragraphs, lists, tables, code, emphasis, links
// and images, resolved against the page's own address). Exports only: ComfyUI loads every script under web/ as an
// extension, and this one registers nothing.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;" };
const escape = (text) => text.replace(/[&<>"]/g, (character) => ESCAPES[character]);

function inline(text, base) {
  const absolute = (href) => escape(new URL(href, base).href);
  return escape(text)
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/!\[([^\]]*)\]\(([^)\s]+)\)/g, (_, alt, href) => `<img alt="${alt}" src="${absolute(href)}">`)
    .replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (_, label, href) => `<a href="${absolute(href)}">${label}</a>`)
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[\s(])[*_]([^*_\s][^*_]*)[*_](?=[\s).,;:]|$)/g, "$1<em>$2</em>");
}

const cells = (line) => line.trim().replace(/^\||\|$/g, "").split("|").map((cell) => cell.trim());

// The page's HTML body for `markdown`, its links and images resolved against `base`.
export function docPageHtml(markdown, base) {
  const html = [];
  const blocks = markdown.replace(/\r\n/g, "\n").split(/\n(?:[ \t]*\n)+/);
  for (const block of blocks) {
    const lines = block.split("\n");
    const heading = /^(#{1,6})\s+(.*)$/.exec(block);
    if (block.startsWith("```")) {
      html.push(`<pre><code>${escape(lines.slice(1, lines.at(-1).startsWith("```") ? -1 : undefined).join("\n"))}</code></pre>`);
    } else if (heading && lines.length === 1) {
      html.push(`<h${heading[1].length}>${inline(heading[2], base)}</h${heading[1].length}>`);
    } else if (lines.every((line) => line.trim().startsWith("|")) && lines.length > 1) {
      const [head, , ...rows] = lines;
      html.push(`<table><tr>${cells(head).map((cell) => `<th>${inline(cell, base)}</th>`).join("")}</tr>${rows
        .map((row) => `<tr>${cells(row).map((cell) => `<td>${inline(cell, base)}</td>`).join("")}</tr>`).join("")}</table>`);
    } else if (/^\s*([-*]|\d+\.)\s/.test(lines[0])) {
      const items = block.split(/\n(?=\s*(?:[-*]|\d+\.)\s)/).map((item) => item.replace(/^\s*([-*]|\d+\.)\s+/, ""));
      const tag = /^\s*\d+\./.test(lines[0]) ? "ol" : "ul";
      html.push(`<${tag}>${items.map((item) => `<li>${inline(item, base)}</li>`).join("")}</${tag}>`);
    } else {
      html.push(`<p>${inline(block, base)}</p>`);
    }
  }
  return html.join("\n");
}

const PAGE_STYLE = "body{font:15px/1.5 sans-serif;max-width:52em;margin:2em auto;padding:0 1em;color:#222}" +
  "code{background:#f2f2f2;padding:0 3px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}" +
  "img{max-width:100%}";

// Opens `url` (a node's .md page) rendered in the tab `opened` (window.open'ed by the click, so no pop-up blocker
// stops it); a page that cannot be fetched says so there.
export async function showDocPage(url, opened) {
  let body;
  let title = "CachedSearch";
  try {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    const markdown = await response.text();
    title = /^#\s+(.*)$/m.exec(markdown)?.[1] ?? title;
    body = docPageHtml(markdown, url);
  } catch (error) {
    body = `<p>Could not load ${escape(url)}: ${escape(String(error.message ?? error))}</p>`;
  }
  opened.document.open();
  opened.document.write(`<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title>` +
    `<base href="${escape(url)}"><style>${PAGE_STYLE}</style></head><body>${body}</body></html>`);
  opened.document.close();
}
