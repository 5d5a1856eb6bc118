// Typed calls through openapi-fetch against types openapi-typescript generated from /v3/api-docs
// (tests/api/test_generated_clients.py copies this file next to the generated api.d.ts).
import createClient from "openapi-fetch";
import type { components, paths } from "./api";

type Project = components["schemas"]["Project"];
type ProjectPage = components["schemas"]["ProjectPage"];
type ConflictError = components["schemas"]["ConflictError"];

const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8000", headers: { "x-api-key": "pk_..." } });

export async function listCreateUpdate(): Promise<Project> {
  const listed = await client.GET("/api/projects", {
    params: { query: { filter: ["name == 'typed'"], pageSize: 5 } },
  });
  if (listed.error) throw new Error(listed.error.message);
  const page: ProjectPage = listed.data;
  const names: string[] = page.content.map((p: Project) => p.name);
  const total: number = page.totalElements + names.length;

  const created = await client.POST("/api/projects", { body: { name: `typed-${total}`, description: "ts" } });
  if (created.error) throw new Error(`${created.error.status} ${created.error.message}`);
  const project: Project = created.data;

  const updated = await client.PUT("/api/projects/{id}", {
    params: { path: { id: project.id } },
    body: { description: "updated", changeSequence: project.changeSequence },
  });
  if (updated.error) {
    const conflict: ConflictError = updated.error;
    throw new Error(`stale: current changeSequence ${conflict.changeSequence ?? "?"}`);
  }
  return updated.data;
}
