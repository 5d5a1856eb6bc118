// Must NOT compile (tests/api/test_generated_clients.py): a page's items are Projects, which have
// no `title`. With an untyped page (items: {} -> unknown, or any) this check could not fail.
import createClient from "openapi-fetch";
import type { paths } from "./api";

const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8000" });

export async function misuse(): Promise<string> {
  const listed = await client.GET("/api/projects", {});
  if (listed.error) throw new Error(listed.error.message);
  return listed.data.content[0].title;
}
