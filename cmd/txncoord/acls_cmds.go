package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/urfave/cli/v2"

	"github.com/txncoord/txncoord/admin"
)

// aclsCommand is `txncoord acls list|create|delete`, as kafka-acls.sh
// (--list, --add, --remove), through the coordinator's admin API: the
// admin token administers ACLs, so an operator can grant the first ones
// of a cluster with security on.
func aclsCommand() *cli.Command {
	filterFlags := func(what string) []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "resource-type", EnvVars: env("resource-type"), Usage: what + "resource type: topic, group, cluster, transactional_id"},
			&cli.StringFlag{Name: "resource-name", EnvVars: env("resource-name"), Usage: what + "resource name (the cluster's is kafka-cluster)"},
			&cli.StringFlag{Name: "pattern-type", EnvVars: env("pattern-type"), Usage: what + "pattern type: literal, prefixed (list and delete also: any, match)"},
			&cli.StringFlag{Name: "principal", EnvVars: env("principal"), Usage: what + "principal, such as User:alice (User:* is every user)"},
			&cli.StringFlag{Name: "host", EnvVars: env("host"), Usage: what + "client host (* is every host)"},
			&cli.StringFlag{Name: "operation", EnvVars: env("operation"), Usage: what + "operation: all, read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write"},
			&cli.StringFlag{Name: "permission", EnvVars: env("permission"), Usage: what + "permission: allow, deny"},
		}
	}
	filterOf := func(c *cli.Context) admin.ACLFilter {
		return admin.ACLFilter{ResourceType: c.String("resource-type"), ResourceName: c.String("resource-name"),
			PatternType: c.String("pattern-type"), Principal: c.String("principal"), Host: c.String("host"),
			Operation: c.String("operation"), Permission: c.String("permission")}
	}
	row := func(a admin.ACL) []string {
		return []string{a.ResourceType, a.ResourceName, a.PatternType, a.Principal, a.Host, a.Operation, a.Permission}
	}
	header := []string{"RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"}
	aclError := func(err error) error {
		var apiErr *admin.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest {
			return usageError{err}
		}
		return err
	}
	return &cli.Command{
		Name:  "acls",
		Usage: "list, create and delete ACLs (as kafka-acls.sh)",
		Description: `Examples:
   txncoord acls create --resource-type topic --resource-name orders- --pattern-type prefixed --principal User:alice --operation write
   txncoord acls list --principal User:alice
   txncoord acls delete --resource-type topic --resource-name orders- --pattern-type prefixed --principal User:alice`,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "list the ACLs a filter matches (no flags: every ACL)",
				Description: "Example:\n   txncoord acls list --resource-type topic --resource-name orders --pattern-type match",
				Flags:       adminFlags(filterFlags("only this ")...),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					acls, err := cl.ACLs(ctx, filterOf(c))
					if err != nil {
						return aclError(err)
					}
					return printList(c, out, acls, header, row)
				}),
			},
			{
				Name:  "create",
				Usage: "create one ACL",
				Description: `Example:
   txncoord acls create --resource-type group --resource-name app- --pattern-type prefixed --principal User:alice --operation read

--resource-type, --resource-name, --principal and --operation are required; --pattern-type
defaults to literal, --host to *, --permission to allow.`,
				Flags: adminFlags(filterFlags("the ")...),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					for _, f := range []string{"resource-type", "resource-name", "principal", "operation"} {
						if c.String(f) == "" {
							return usagef("--%s is required", f)
						}
					}
					acl := admin.ACL(filterOf(c))
					if acl.PatternType == "" {
						acl.PatternType = "literal"
					}
					if acl.Host == "" {
						acl.Host = "*"
					}
					if acl.Permission == "" {
						acl.Permission = "allow"
					}
					if err := cl.CreateACLs(ctx, []admin.ACL{acl}); err != nil {
						return aclError(err)
					}
					if out == "json" {
						return printJSON(c.App.Writer, acl)
					}
					_, err := fmt.Fprintf(c.App.Writer, "Created ACL: %s %s %s on %s %s (%s) from host %s.\n",
						acl.Permission, acl.Principal, acl.Operation, acl.ResourceType, acl.ResourceName, acl.PatternType, acl.Host)
					return err
				}),
			},
			{
				Name:  "delete",
				Usage: "delete the ACLs a filter matches",
				Description: `Example:
   txncoord acls delete --principal User:alice --resource-type topic

At least one filter flag is required (delete every ACL with --resource-type any).`,
				Flags: adminFlags(filterFlags("only this ")...),
				Action: adminAction(func(c *cli.Context, ctx context.Context, cl *admin.Client, out outputFormat) error {
					f := filterOf(c)
					if f == (admin.ACLFilter{}) {
						return usagef("give at least one filter flag (--resource-type any deletes every ACL)")
					}
					deleted, err := cl.DeleteACLs(ctx, f)
					if err != nil {
						return aclError(err)
					}
					return printList(c, out, deleted, header, row)
				}),
			},
		},
	}
}
