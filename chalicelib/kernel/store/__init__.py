"""The single DynamoDB table: key shapes and named reads (``table``), writes and transactions
(``repository``), the pynamodb model and clients (``model``, ``endpoints``), credential and ACL
items (``credentials``), the request gate's one UpdateItem (``gate``), outbox items (``outbox``).
The only package that holds a DynamoDB client, an index name or a key condition."""
