package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/offsets"
)

func newAdminCmd(logger func() *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{Use: "admin", Short: "Administer a node or group"}
	var data string
	openDB := func() (*offsets.DB, error) {
		return offsets.Open(filepath.Join(data, "meta.db"), offsets.Options{Logger: logger()})
	}
	export := &cobra.Command{
		Use:   "export-config DIR",
		Short: "Write RocketMQ-compatible topics.json, consumerOffset.json, subscriptionGroup.json",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			db, err := openDB()
			if err != nil {
				return err
			}
			defer db.Close()
			if err := offsets.ExportConfig(db, args[0]); err != nil {
				return err
			}
			fmt.Printf("exported topics.json, consumerOffset.json, subscriptionGroup.json to %s\n", args[0])
			return nil
		},
	}
	imp := &cobra.Command{
		Use:   "import-config-offline DIR",
		Short: "Write RocketMQ topics.json, consumerOffset.json, subscriptionGroup.json into ONE STOPPED node's store, not through raft (the nodes diverge unless each gets the same import; see import-config)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			db, err := openDB()
			if err != nil {
				return err
			}
			defer db.Close()
			sum, err := offsets.ImportConfig(db, args[0])
			if err != nil {
				return err
			}
			fmt.Printf("imported from %s: %+v\n", args[0], sum)
			return nil
		},
	}
	for _, c := range []*cobra.Command{export, imp} {
		c.Flags().StringVar(&data, "data", "raftmq-data/n1", "the node's store directory (stop the node first)")
	}
	cmd.AddCommand(export, imp, newImportConfigCmd(logger))
	cmd.AddCommand(adminGroupCmds(logger)...)
	adminOpsCmds(cmd, logger)
	return cmd
}
