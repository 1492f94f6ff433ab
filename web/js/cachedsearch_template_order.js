// The template browser shows a node pack's workflows in the order the server lists them, which is the file system's
// (a glob: on ext4, hash order), and no frontend from 1.32 to 1.58 sorts them unless the artist picks "A → Z". The
// workflows' names are numbered in the order an artist should meet them, so this pack's list is put in that order
// before any frontend reads it (by wrapping the api object's own getter, the one reader of that list). Other packs'
// lists are left as the server gave them.
import { api } from "../../../scripts/api.js";

const FOLDER = decodeURIComponent(new URL(import.meta.url).pathname.split("/")[2]);  // /extensions/<folder>/js/...
const byNumber = (a, b) => a.localeCompare(b, undefined, { numeric: true });
const listed = api.getWorkflowTemplates;

// A frontend without this method (1.32 to 1.58 all have it) keeps the server's order; the titles still read.
if (typeof listed === "function") {
  api.getWorkflowTemplates = async function (...args) {
    const templates = await listed.apply(this, args);
    if (Array.isArray(templates?.[FOLDER])) templates[FOLDER] = [...templates[FOLDER]].sort(byNumber);
    return templates;
  };
}
